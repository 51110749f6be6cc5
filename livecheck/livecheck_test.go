package livecheck_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// storeResource is the resource the store API gets in the rows that give it one.
const storeResource = "https://api.example.com/store"

// TestFindings runs every probe against poppytest with one Company-side
// rule broken at a time (its Flaws), and against the strict default: each
// row must fail exactly the checks that rule is about, with Security set
// for what the Company must refuse, and nothing else. The clean rows prove
// that no check fires wrongly.
func TestFindings(t *testing.T) {
	type want map[string]bool // check ID -> Security
	noOpenAPI := func(doc map[string]any) {
		doc["apis"] = slices.DeleteFunc(doc["apis"].([]any), func(a any) bool { return a.(map[string]any)["type"] == "openapi" })
	}
	accountOnly := func(doc map[string]any) { delete(doc["paths"].(map[string]any), "/products") }
	for _, tc := range []struct {
		name     string
		flaws    poppytest.Flaws
		resource bool // the store API has a resource
		noNonce  bool
		poppy    func(doc map[string]any)
		openapi  func(doc map[string]any)
		setup    func(srv *poppytest.Server)
		want     want
	}{
		{name: "clean", want: want{}},
		{name: "clean with a resource", resource: true, want: want{}},
		{name: "clean without nonces", noNonce: true, want: want{}},
		{name: "ignores htm, without nonces", noNonce: true, flaws: poppytest.Flaws{IgnoreHTM: true}, want: want{"refuse.proof_htm": true}},
		{name: "replayed jti", flaws: poppytest.Flaws{ReplayedAssertions: true}, want: want{"refuse.replayed_jti": true}},
		{name: "array aud", flaws: poppytest.Flaws{ArrayAudience: true}, want: want{"refuse.array_aud": true}},
		{name: "wrong aud", flaws: poppytest.Flaws{AnyAudience: true}, want: want{"refuse.wrong_aud": true}},
		{name: "expired assertion", flaws: poppytest.Flaws{ExpiredAssertions: true}, want: want{"refuse.expired_assertion": true}},
		{name: "foreign iss", flaws: poppytest.Flaws{ForeignIssuer: true}, want: want{"refuse.foreign_iss": true}},
		{name: "any nonce", flaws: poppytest.Flaws{AnyNonce: true}, want: want{"refuse.wrong_nonce": true}},
		{name: "renewal drops session_id", flaws: poppytest.Flaws{RenewalDropsSessionID: true}, want: want{"session.renew": false}},
		{name: "no Cache-Control", flaws: poppytest.Flaws{CacheableTokens: true}, want: want{"session.no_store": false}},
		{name: "ignores htm", flaws: poppytest.Flaws{IgnoreHTM: true}, want: want{"refuse.proof_htm": true}},
		{name: "ignores htu", flaws: poppytest.Flaws{IgnoreHTU: true}, want: want{"refuse.proof_htu": true}},
		{name: "any proof key", flaws: poppytest.Flaws{AnyProofKey: true}, want: want{"refuse.proof_key": true}},
		{name: "no proof needed", flaws: poppytest.Flaws{MissingProof: true}, want: want{"refuse.no_proof": true}},
		{name: "Bearer anywhere", flaws: poppytest.Flaws{BearerAnywhere: true}, want: want{"refuse.bearer_downgrade": true}},
		{name: "tokens in the query", flaws: poppytest.Flaws{QueryTokens: true}, want: want{"refuse.query_token": true}},
		{name: "tokens in the query, with a resource", resource: true, flaws: poppytest.Flaws{QueryTokens: true}, want: want{"refuse.query_token": true}},
		{name: "any resource's token", resource: true, flaws: poppytest.Flaws{AnyResource: true},
			want: want{"refuse.other_resource": true, "refuse.resource_elsewhere": true}},
		{name: "MCP Bearer tokens anywhere", resource: true, flaws: poppytest.Flaws{AnyResource: true, BearerAnywhere: true},
			want: want{"refuse.other_resource": true, "refuse.resource_elsewhere": true, "refuse.bearer_downgrade": true, "refuse.mcp_bearer": true}},
		{name: "invalid_request for an unknown scope", flaws: poppytest.Flaws{UnknownScopeInvalidRequest: true}, want: want{"signin.device_scope": false}},
		{name: "mediated without a token", flaws: poppytest.Flaws{MediatedWithoutToken: true}, want: want{"signin.mediated_no_token": false}},
		{name: "duplicate messages", flaws: poppytest.Flaws{DuplicateMessages: true}, want: want{"conv.resend_first": false, "conv.resend": false}},
		// Without an OpenAPI API the resource probes go to a read of an unknown conversation.
		{name: "no OpenAPI API", poppy: noOpenAPI, want: want{}},
		{name: "no OpenAPI API, ignores htm", poppy: noOpenAPI, flaws: poppytest.Flaws{IgnoreHTM: true}, want: want{"refuse.proof_htm": true}},
		// With only operations that want an account, they go to one: it knows a valid token.
		{name: "account operations only", openapi: accountOnly, want: want{}},
		{name: "account operations only, any proof key", openapi: accountOnly, flaws: poppytest.Flaws{AnyProofKey: true}, want: want{"refuse.proof_key": true}},
		{name: "revocation errors on an unknown token", setup: func(srv *poppytest.Server) {
			srv.HandleFunc("auth.example.com", "POST /oauth/revoke", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"error":"invalid_request"}`))
			})
		}, want: want{"signin.revoke_unknown": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &poppytest.Options{Flaws: tc.flaws, PoppyJSON: tc.poppy, OpenAPI: tc.openapi, NoNonce: tc.noNonce}
			if tc.resource {
				o.OpenAPIResource = storeResource
			}
			srv, _, c := company(t, o, &livecheck.Options{Conversations: true})
			if tc.setup != nil {
				tc.setup(srv)
			}
			rep, err := c.Run(context.Background(), "example.com")
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, dump(rep))
			}
			for _, ch := range rep.Checks {
				sec, failing := tc.want[ch.ID]
				switch {
				case failing && (ch.Status != livecheck.Failed || ch.Security != sec):
					t.Errorf("%s: %s (security %v), want error (security %v): %s", ch.ID, ch.Status, ch.Security, sec, ch.Message)
				case !failing && ch.Status != livecheck.Passed && ch.Status != livecheck.Skipped:
					t.Errorf("%s fired wrongly: %s: %s", ch.ID, ch.Status, ch.Message)
				}
			}
			if ch := byID(rep)["nonce.token"]; tc.noNonce && (ch.Status != livecheck.Skipped || !strings.Contains(ch.Message, "does not use DPoP nonces")) {
				t.Errorf("nonce.token without nonces: %+v", ch)
			}
			if rep.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with %d failing checks wanted", rep.OK(), len(tc.want))
			}
		})
	}
}

// TestCleanRun: against the strict Company every probe passes but those
// that do not apply, each says so, the count of requests is the Company's,
// within the bound, and the Company saw only the violations the probes
// commit on purpose.
func TestCleanRun(t *testing.T) {
	srv, rp, c := company(t, &poppytest.Options{OpenAPIResource: storeResource}, &livecheck.Options{Conversations: true})
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil || !rep.OK() || !rep.Usable {
		t.Fatalf("Run: %v, OK %v\n%s", err, rep.OK(), dump(rep))
	}
	for _, ch := range rep.Checks {
		if ch.Status != livecheck.Passed {
			t.Errorf("%s: %s: %s", ch.ID, ch.Status, ch.Message)
		}
	}
	seen := 0
	for _, r := range srv.Requests() {
		if r.Host != srv.AgentHost() { // the Company fetching the agent's documents is not the run's
			seen++
		}
	}
	if rep.Requests != seen || rep.Requests > livecheck.DefaultMaxRequests || rep.MaxRequests != livecheck.DefaultMaxRequests {
		t.Errorf("the report counts %d requests of %d; the Company saw %d", rep.Requests, rep.MaxRequests, seen)
	}
	// Each violation is a probe's on purpose: one per must-refuse probe sent
	// to poppytest, plus the requests without a Session Token.
	viols := rp.violations()
	for _, v := range viols {
		if !strings.Contains(v, "§4.2") && !strings.Contains(v, "§4.3") {
			t.Errorf("a violation no probe commits on purpose: %s", v)
		}
	}
	if len(viols) != 17 {
		t.Errorf("%d violations, want 17 (the deliberate ones):\n%s", len(viols), strings.Join(viols, "\n"))
	}
}

// TestSafe: a run never signs in, never sends an API anything but GET,
// issues no device code, and says no secret the Company issued.
func TestSafe(t *testing.T) {
	srv, _, c := company(t, nil, &livecheck.Options{Conversations: true})
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srv.Sessions() {
		if s.SignedIn || s.Account != "" {
			t.Errorf("Session %s is signed in", s.ID)
		}
	}
	if n := srv.Served("device_code"); n != 0 {
		t.Errorf("%d device codes issued", n)
	}
	for _, r := range srv.Requests() {
		if r.Host == "api.example.com" && r.Method != http.MethodGet && !strings.HasPrefix(r.Path, "/poppy/conversations") {
			t.Errorf("%s %s%s sent to an API", r.Method, r.Host, r.Path)
		}
		if r.Path == "/oauth/authorize" || strings.Contains(string(r.Body), "grant_type=refresh_token") ||
			strings.Contains(string(r.Body), "device_code") || strings.Contains(string(r.Body), "authorization_code") {
			t.Errorf("a sign-in request: %s %s%s", r.Method, r.Host, r.Path)
		}
	}
	text := dump(rep)
	for _, sec := range srv.IssuedSecrets() {
		if strings.Contains(text, sec) {
			t.Errorf("the report holds a secret the Company issued or received")
		}
	}
}

// TestConversationsOnlyWhenAsked: without Options.Conversations no
// conversation is started, and the §7 probes say why they were skipped.
func TestConversationsOnlyWhenAsked(t *testing.T) {
	srv, _, c := company(t, nil, nil)
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil || !rep.OK() {
		t.Fatalf("Run: %v\n%s", err, dump(rep))
	}
	if n := srv.Count("api.example.com", "/poppy/conversations"); n != 0 {
		t.Errorf("%d conversations started", n)
	}
	for id, ch := range byID(rep) {
		if strings.HasPrefix(id, "conv.") && (ch.Status != livecheck.Skipped || !strings.Contains(ch.Message, "--conversations")) {
			t.Errorf("%s: %s %s", id, ch.Status, ch.Message)
		}
	}
}

// TestPlan: a dry run reads the public documents and sends no probe; its
// steps are the checks a run makes, in the same order.
func TestPlan(t *testing.T) {
	srv, _, c := company(t, nil, &livecheck.Options{Conversations: true})
	steps, rep, err := c.Plan(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if !strings.HasPrefix(r.Path, "/.well-known/") {
			t.Errorf("the plan sent %s %s%s", r.Method, r.Host, r.Path)
		}
	}
	run, err := c.Run(context.Background(), "example.com")
	if err != nil {
		t.Fatal(err)
	}
	var planned, ran []string
	for _, s := range steps {
		planned = append(planned, s.ID)
		if s.Does == "" {
			t.Errorf("step %s says nothing", s.ID)
		}
		if (s.Skip != "") != (byID(run)[s.ID].Status == livecheck.Skipped) {
			t.Errorf("step %s: planned skip %q, ran %s", s.ID, s.Skip, byID(run)[s.ID].Status)
		}
	}
	for _, ch := range run.Checks {
		ran = append(ran, ch.ID)
	}
	if !slices.Equal(planned, ran) || rep.Requests == 0 {
		t.Errorf("planned %v\nran %v", planned, ran)
	}
}
