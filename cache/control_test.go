package cache

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseCacheControl(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  cacheControl
	}{
		{nil, cacheControl{}},
		{[]string{""}, cacheControl{}},
		{[]string{"max-age=60"}, cacheControl{"max-age": "60"}},
		{[]string{"Max-Age=60, NO-CACHE"}, cacheControl{"max-age": "60", "no-cache": ""}},
		{[]string{"public,max-age=3600 , must-revalidate"},
			cacheControl{"public": "", "max-age": "3600", "must-revalidate": ""}},
		{[]string{"max-age=60", "no-store"}, cacheControl{"max-age": "60", "no-store": ""}},
		{[]string{`max-age="60"`}, cacheControl{"max-age": "60"}},
		// A comma inside a quoted string does not end the directive.
		{[]string{`no-cache="Set-Cookie, X-Foo", max-age=5`},
			cacheControl{"no-cache": "Set-Cookie, X-Foo", "max-age": "5"}},
		{[]string{`private="a\"b\\c"`}, cacheControl{"private": `a"b\c`}},
		// The first occurrence wins (RFC 9111 §4.2.1).
		{[]string{"max-age=5, max-age=500"}, cacheControl{"max-age": "5"}},
		{[]string{"max-age=5", "max-age=500"}, cacheControl{"max-age": "5"}},
		{[]string{" , ,max-age = 7,, "}, cacheControl{"max-age": "7"}},
		// Invalid members are skipped whole.
		{[]string{"max-age=5 no-store, public"}, cacheControl{"public": ""}},
		{[]string{"=5, @x, no-store"}, cacheControl{"no-store": ""}},
		{[]string{`max-age=, x="unterminated, no-store`}, cacheControl{}},
		{[]string{`a="q" junk, b`}, cacheControl{"b": ""}},
		{[]string{"max-age=\"1\"\"2\", c"}, cacheControl{"c": ""}},
	} {
		got := parseCacheControl(tc.lines)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("parseCacheControl(%q) (-want +got):\n%s", tc.lines, diff)
		}
	}
}

func TestDeltaSeconds(t *testing.T) {
	for _, tc := range []struct {
		v       string
		want    time.Duration
		invalid bool
	}{
		{"0", 0, false},
		{"60", time.Minute, false},
		{"007", 7 * time.Second, false},
		{"2147483648", maxDeltaSeconds * time.Second, false},
		{"99999999999999999999999999", maxDeltaSeconds * time.Second, false},
		{"", 0, true},
		{"-1", 0, true},
		{"1.5", 0, true},
		{"1e3", 0, true},
		{" 5", 0, true},
	} {
		got, ok, invalid := cacheControl{"max-age": tc.v}.deltaSeconds("max-age")
		if !ok || got != tc.want || invalid != tc.invalid {
			t.Errorf("max-age=%q: %v %v %v, want %v invalid=%v", tc.v, got, ok, invalid, tc.want, tc.invalid)
		}
	}
	if _, ok, _ := (cacheControl{}).deltaSeconds("max-age"); ok {
		t.Error("absent max-age reported present")
	}
}

func TestRequestControl(t *testing.T) {
	for _, tc := range []struct {
		header  http.Header
		age     time.Duration
		revalid bool
	}{
		{http.Header{}, time.Hour, false},
		{http.Header{"Cache-Control": {"no-cache"}}, 0, true},
		{http.Header{"Pragma": {"no-cache"}}, 0, true},
		// RFC 9111 §5.4: Pragma is ignored when Cache-Control is present.
		{http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"max-age=60"}}, 0, false},
		{http.Header{"Cache-Control": {"max-age=0"}}, 0, true},
		{http.Header{"Cache-Control": {"max-age=10"}}, 9 * time.Second, false},
		{http.Header{"Cache-Control": {"max-age=10"}}, 10 * time.Second, true},
		{http.Header{"Cache-Control": {"max-age=x"}}, 0, true},
		{http.Header{"Cache-Control": {"no-store"}}, 0, false},
	} {
		got := mustRevalidateRequest(requestControl(tc.header), tc.age)
		if got != tc.revalid {
			t.Errorf("%v at age %v: revalidate = %v, want %v", tc.header, tc.age, got, tc.revalid)
		}
	}
}

func FuzzParseCacheControl(f *testing.F) {
	for _, seed := range []string{
		"", "max-age=60", "no-cache, no-store, must-revalidate", "public, max-age=31536000, immutable",
		`private="Set-Cookie, Authorization", max-age=0`, `a="\"\\", b=c`, `x="unterminated`,
		"max-age=5 6", "=,=,,", "MAX-AGE=99999999999999999999", "no-cache=\"a\"junk, s-maxage=1",
		"\x00\xff,\t max-age\t=\t1",
	} {
		f.Add(seed, "no-cache")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		cc := parseCacheControl([]string{a, b})
		for name, v := range cc {
			if name == "" || tokenLen(name) != len(name) || name != strings.ToLower(name) {
				t.Fatalf("directive name %q is not a lower-case token", name)
			}
			if d, ok := parseDeltaSeconds(v); ok && (d < 0 || d > maxDeltaSeconds*time.Second) {
				t.Fatalf("delta-seconds %q = %v", v, d)
			}
		}
		// Formatting and parsing again gives the same directives.
		if again := parseCacheControl([]string{cc.String()}); !cmp.Equal(cc, again) {
			t.Fatalf("round trip of %q via %q: %s", []string{a, b}, cc.String(), cmp.Diff(cc, again))
		}
		// What is parsed does not depend on how the lines were split.
		if joined := parseCacheControl([]string{a + "," + b}); !cmp.Equal(cc, joined) && !strings.Contains(a, `"`) {
			t.Fatalf("%q and %q parse differently joined: %s", a, b, cmp.Diff(cc, joined))
		}
	})
}
