// Package teststore opens a throwaway store for tests: SQLite in the test's
// temporary directory, a fixed key, no keychain, closed when the test ends.
package teststore

import (
	"context"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// Open opens a new store in t's temporary directory, keyed with 32 zero
// bytes and no keychain, and closes it when t ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
