package tools_test

import (
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestRestartResumesSignedInSession: a new poppy-mcp process over the same
// store resumes the saved signed-in Session (its cart and conversations)
// with the Account Token, instead of renewing it with the JWT bearer grant
// (a §4.2 violation poppytest reports) and starting a new Session.
func TestRestartResumesSignedInSession(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(func(o *poppytest.Options) { o.RotateRefreshTokens = true }))
			before := signIn(t, h, h.connect(t, rev), "poppy:read")
			h.tools.Close() // the first process ends, giving its Session back
			_, cs2 := h.another(t, rev)
			_, got := call(t, cs2, "start_session", map[string]any{"domain": domain})
			if got["session_id"] != before["session_id"] || got["signed_in"] != true {
				t.Fatalf("start_session after a restart = %v, want Session %v signed in", got, before["session_id"])
			}
			if v := h.company.Violations(); len(v) != 0 {
				t.Errorf("violations: %v", v)
			}
		})
	}
}
