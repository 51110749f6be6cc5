package app

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestDeploymentSecret: before a hosted start there is no secret; the
// first makes one, and processes starting at once all get that one.
func TestDeploymentSecret(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	if _, err := StoredDeploymentSecret(ctx, st); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before any start: %v, want store.ErrNotFound", err)
	}
	got := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			b, err := DeploymentSecret(ctx, st)
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		})
	}
	wg.Wait()
	for _, b := range got {
		if len(b) != secretSize || !bytes.Equal(b, got[0]) {
			t.Fatalf("processes starting at once disagree: %x", got)
		}
	}
	if b, err := StoredDeploymentSecret(ctx, st); err != nil || !bytes.Equal(b, got[0]) {
		t.Errorf("the stored secret: %x, %v", b, err)
	}
}

// TestDeploymentSecretTooShort: a stored secret shorter than 32 bytes is
// not used: a new one replaces it.
func TestDeploymentSecretTooShort(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	if err := st.PutSecret(ctx, SecretName, []byte("short")); err != nil {
		t.Fatal(err)
	}
	b, err := DeploymentSecret(ctx, st)
	if err != nil || len(b) != secretSize {
		t.Errorf("over a short secret: %x, %v", b, err)
	}
}
