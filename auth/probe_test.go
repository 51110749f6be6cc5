package auth

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSignProbeAssertion: the claims given go on the wire as they are (an
// array aud stays an array, a foreign iss stays foreign), under a valid
// signature of the current key, with a fresh jti each time.
func TestSignProbeAssertion(t *testing.T) {
	clock := newClock()
	id := newTestIdentity(t, nil)
	id.now = clock.Now
	pub := id.current.PublicKey()
	const tokenEP = "https://auth.example.com/oauth/token"
	past := clock.Now().Add(-10 * time.Minute)
	for _, tc := range []struct {
		name string
		in   ProbeClaims
		want map[string]any
	}{
		{"defaults", ProbeClaims{Subject: "usr_1", Audience: tokenEP},
			map[string]any{"iss": testClientID, "sub": "usr_1", "aud": tokenEP, "iat": 1790900000.0, "exp": 1790900060.0}},
		{"array aud", ProbeClaims{Subject: "usr_1", Audience: []string{tokenEP}},
			map[string]any{"iss": testClientID, "sub": "usr_1", "aud": []any{tokenEP}, "iat": 1790900000.0, "exp": 1790900060.0}},
		{"foreign iss, expired", ProbeClaims{Issuer: "https://other.invalid/agent.json", Subject: "usr_1", Audience: tokenEP,
			IssuedAt: past, Expires: past.Add(5 * time.Minute)},
			map[string]any{"iss": "https://other.invalid/agent.json", "sub": "usr_1", "aud": tokenEP,
				"iat": float64(past.Unix()), "exp": float64(past.Unix() + 300)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			for range 2 {
				as, err := id.SignProbeAssertion(tc.in)
				if err != nil {
					t.Fatal(err)
				}
				hdr, c := verifyJWS(t, as.Reveal(), pub)
				if hdr.ExtraHeaders["typ"] != "JWT" || hdr.KeyID != id.CurrentKeyID() {
					t.Errorf("header = %+v", hdr)
				}
				jti, _ := c["jti"].(string)
				if raw, err := base64Raw(jti); err != nil || len(raw) != 16 || seen[jti] {
					t.Errorf("jti %q: not 16 fresh random bytes", jti)
				}
				seen[jti] = true
				delete(c, "jti")
				if d := cmp.Diff(tc.want, c); d != "" {
					t.Errorf("claims (-want +got):\n%s", d)
				}
			}
		})
	}
	if _, err := id.SignProbeAssertion(ProbeClaims{Audience: tokenEP}); err == nil {
		t.Error("a probe assertion without sub was signed")
	}
}
