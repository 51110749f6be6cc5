package auth

import (
	"context"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
)

// TestClaimSession: one process at a time continues a Session; once given
// back, another may.
func TestClaimSession(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	release, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1")
	if err != nil || !ok {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if _, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1"); err != nil || ok {
		t.Fatalf("second claim while held: %v, %v", ok, err)
	}
	if _, ok, err := ClaimSession(ctx, st.ForUser("someone else"), "https://auth.example.com", "ses_1"); err != nil || !ok {
		t.Fatalf("another person's claim: %v, %v", ok, err)
	}
	release()
	again, ok, err := ClaimSession(ctx, st, "https://auth.example.com", "ses_1")
	if err != nil || !ok {
		t.Fatalf("claim after release: %v, %v", ok, err)
	}
	again()
}
