package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestClaimSession: one process at a time continues a Session; once given
// back, another may, and the first, which lost its claim, can no longer
// write the Session's record.
func TestClaimSession(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	first, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1")
	if err != nil || !ok {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	rec := store.Session{Issuer: "https://auth.example.com", ID: "ses_1", UserID: testUser}
	if err := first.Store.PutSession(ctx, rec); err != nil {
		t.Fatalf("the claimant's write: %v", err)
	}
	if _, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1"); err != nil || ok {
		t.Fatalf("second claim while held: %v, %v", ok, err)
	}
	if _, ok, err := ClaimSession(ctx, st.ForUser("someone else"), "https://auth.example.com", "ses_1"); err != nil || !ok {
		t.Fatalf("another person's claim: %v, %v", ok, err)
	}
	first.Release()
	again, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1")
	if err != nil || !ok {
		t.Fatalf("claim after release: %v, %v", ok, err)
	}
	defer again.Release()
	rec.SignedIn = true
	if err := first.Store.PutSession(ctx, rec); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the old claimant's write: %v, want ErrLeaseLost", err)
	}
	if err := again.Store.PutSession(ctx, rec); err != nil {
		t.Errorf("the new claimant's write: %v", err)
	}
}
