package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestWithStore: two people's views of one Agent (each on their own store
// view, as a hosted poppy-mcp gives them) sign in to one Company with their
// own accounts; each one's DPoP key and Account Token are in their own
// store only, and the Company sees two signed-in Users.
func TestWithStore(t *testing.T) {
	co := newSignInCo(t, nil)
	ctx := context.Background()
	people := map[string]string{"person-a": "acct_dana", "person-b": "acct_sam"}
	for key, account := range people {
		a := co.agent.WithStore(co.st.ForUser(key))
		userID, err := co.st.ForUser(key).UserID(ctx, co.c.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		s, err := a.Open(ctx, co.c, userID, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Hold(ctx, co.signInDevice(t, s, account, []string{"poppy:read"})); err != nil {
			t.Fatal(err)
		}
		for who, view := range map[string]*store.Store{"own": co.st.ForUser(key), "default user's": co.st} {
			_, keyErr := view.Secret(ctx, "dpop/"+co.c.Issuer+"/"+userID)
			_, tokErr := view.AccountToken(ctx, co.c.Issuer, userID, DefaultAccountLabel)
			if mine := who == "own"; mine != (keyErr == nil) || mine != (tokErr == nil) {
				t.Errorf("%s in the %s store: DPoP key %v, Account Token %v", key, who, keyErr, tokErr)
			}
			if who != "own" && (!errors.Is(keyErr, store.ErrNotFound) || !errors.Is(tokErr, store.ErrNotFound)) {
				t.Errorf("%s: %v, %v", key, keyErr, tokErr)
			}
		}
	}
	users := map[string]string{}
	for _, s := range co.srv.SignedInSessions() {
		users[s.Account] = s.UserID
	}
	if len(users) != 2 || users["acct_dana"] == users["acct_sam"] {
		t.Errorf("the Company's signed-in Users: %v", users)
	}
}
