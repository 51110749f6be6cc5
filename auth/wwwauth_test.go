package auth

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseWWWAuthenticate(t *testing.T) {
	p := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		in   string
		want []Challenge
	}{
		{`DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"`,
			[]Challenge{{Scheme: "DPoP", Params: p("error", "use_dpop_nonce", "error_description", "Resource server requires nonce in DPoP proof")}}},
		// RFC 9449 §7.1 example, with algs.
		{`DPoP algs="ES256 PS256"`, []Challenge{{Scheme: "DPoP", Params: p("algs", "ES256 PS256")}}},
		// Several challenges in one field; case-insensitive names; token values.
		{`Bearer realm="mcp", ERROR=invalid_token, DPoP error="invalid_token", algs=ES256`,
			[]Challenge{
				{Scheme: "Bearer", Params: p("realm", "mcp", "error", "invalid_token")},
				{Scheme: "DPoP", Params: p("error", "invalid_token", "algs", "ES256")},
			}},
		// RFC 9110 §11.6.1 example.
		{`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`,
			[]Challenge{
				{Scheme: "Newauth", Params: p("realm", "apps", "type", "1", "title", `Login to "apps"`)},
				{Scheme: "Basic", Params: p("realm", "simple")},
			}},
		{`Basic, dpop error="insufficient_scope", scope="poppy:read poppy:write"`,
			[]Challenge{
				{Scheme: "Basic", Params: p()},
				{Scheme: "dpop", Params: p("error", "insufficient_scope", "scope", "poppy:read poppy:write")},
			}},
		{`Negotiate abc+/def==, DPoP error = "x"`,
			[]Challenge{
				{Scheme: "Negotiate", Params: p(), Token68: "abc+/def=="},
				{Scheme: "DPoP", Params: p("error", "x")},
			}},
		{`Bearer`, []Challenge{{Scheme: "Bearer", Params: p()}}},
		{` , ,DPoP  error="a" , , `, []Challenge{{Scheme: "DPoP", Params: p("error", "a")}}},
		// Duplicates: the first wins.
		{`DPoP error="a", error="b"`, []Challenge{{Scheme: "DPoP", Params: p("error", "a")}}},
		// Malformed: an unterminated string ends the parse, keeping the challenge.
		{`DPoP error="use_dpop_nonce`, []Challenge{{Scheme: "DPoP", Params: p()}}},
		{`DPoP error="a" junk`, []Challenge{{Scheme: "DPoP", Params: p("error", "a")}}},
		{`DPoP tok tok`, []Challenge{{Scheme: "DPoP", Params: p()}}},
		{`"quoted"`, nil},
		{``, nil},
	} {
		got := ParseWWWAuthenticate(tc.in)
		if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("ParseWWWAuthenticate(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestParseChallengesSeveralLines(t *testing.T) {
	h := http.Header{}
	h.Add("WWW-Authenticate", `Bearer realm="x"`)
	h.Add("Www-Authenticate", `DPoP error="use_dpop_nonce"`)
	cs := ParseChallenges(h)
	c, ok := FindChallenge(cs, "dpop")
	if len(cs) != 2 || !ok || c.Params["error"] != "use_dpop_nonce" {
		t.Errorf("challenges = %+v", cs)
	}
	if _, ok := FindChallenge(cs, "Basic"); ok {
		t.Error("found a Basic challenge")
	}
	h.Set("WWW-Authenticate", strings.Repeat("A, ", 1000))
	if n := len(ParseChallenges(h)); n != maxChallenges {
		t.Errorf("%d challenges, want the cap %d", n, maxChallenges)
	}
}

func FuzzParseWWWAuthenticate(f *testing.F) {
	for _, s := range []string{
		`DPoP error="use_dpop_nonce", error_description="x"`,
		`Bearer realm="mcp", error=invalid_token, DPoP algs="ES256"`,
		`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`,
		`Negotiate abc+/def==, DPoP error = "x"`,
		`DPoP error="\`, `,,,`, `a=b`, `A B=C, D`, "DPoP error=\"\x00\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs := ParseWWWAuthenticate(s)
		if len(cs) > maxChallenges {
			t.Fatalf("%d challenges", len(cs))
		}
		for _, c := range cs {
			if c.Scheme == "" {
				t.Fatal("empty scheme")
			}
			for _, ch := range []byte(c.Scheme) {
				if !isTchar(ch) {
					t.Fatalf("scheme %q has a non-token byte", c.Scheme)
				}
			}
			for k := range c.Params {
				if k != strings.ToLower(k) || k == "" {
					t.Fatalf("param name %q", k)
				}
			}
		}
	})
}
