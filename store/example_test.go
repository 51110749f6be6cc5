package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "poppy-state") // in real use: store.DefaultDir()
	defer os.RemoveAll(dir)

	// With no Options.Key and no POPPY_STATE_KEY, the state key comes from the
	// OS keychain or, where none answers, from state.key in dir.
	s, err := store.Open(ctx, dir, &store.Options{Keychain: store.NoKeychain{}})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	log.Printf("state key from %s", s.KeySource()) // "file" here; "env" with POPPY_STATE_KEY set

	if err := s.PutSecret(ctx, "agent-key", []byte("-----BEGIN PRIVATE KEY-----...")); err != nil {
		log.Fatal(err)
	}
	key, err := s.Secret(ctx, "agent-key")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(key) > 0)
	// Output: true
}

// exampleStore opens a Store in a temporary directory with a fixed key.
func exampleStore(ctx context.Context) (s *store.Store, done func()) {
	dir, _ := os.MkdirTemp("", "poppy-state")
	s, err := store.Open(ctx, dir, &store.Options{Key: make([]byte, 32)})
	if err != nil {
		log.Fatal(err)
	}
	return s, func() { s.Close(); os.RemoveAll(dir) }
}

func ExampleStore_UserID() {
	ctx := context.Background()
	s, done := exampleStore(ctx)
	defer done()

	// The same Company (auth.issuer) always gets the same random User ID;
	// another Company gets another.
	a, _ := s.UserID(ctx, "https://auth.example.com")
	again, _ := s.UserID(ctx, "https://auth.example.com")
	b, _ := s.UserID(ctx, "https://auth.other.example")
	fmt.Println(strings.HasPrefix(a, "usr_"), a == again, a == b)
	// Output: true true false
}

func ExampleSecret() {
	tok := store.AccountToken{
		Issuer:  "https://auth.example.com",
		UserID:  "usr_Q7c1vK",
		Account: "personal",
		Token:   store.NewSecretString("rt_8xLOxBtZp8"),
	}
	fmt.Printf("%v\n", tok.Token)
	j, _ := json.Marshal(tok)
	fmt.Println(string(j))
	fmt.Println(tok.Token.RevealString() == "rt_8xLOxBtZp8")
	// Output:
	// [REDACTED]
	// {"Issuer":"https://auth.example.com","UserID":"usr_Q7c1vK","Account":"personal","Scopes":null,"ExpiresAt":"0001-01-01T00:00:00Z","Token":"[REDACTED]","UsedAt":"0001-01-01T00:00:00Z"}
	// true
}

func ExampleStore_PutAccountToken() {
	ctx := context.Background()
	s, done := exampleStore(ctx)
	defer done()

	const issuer = "https://auth.example.com"
	userID, _ := s.UserID(ctx, issuer)
	// After sign-in (Poppy 0.1 §4.4) keep the refresh_token as the Account
	// Token; a later one for the same account replaces it (§4.8).
	err := s.PutAccountToken(ctx, store.AccountToken{
		Issuer:  issuer,
		UserID:  userID,
		Account: "personal",
		Scopes:  []string{"poppy:read", "orders:write"},
		Token:   store.NewSecretString("rt_8xLOxBtZp8"),
	})
	if err != nil {
		log.Fatal(err)
	}
	toks, _ := s.AccountTokens(ctx, issuer, userID)
	for _, t := range toks {
		fmt.Println(t.Account, t.Scopes, t.Token, t.ExpiresAt.IsZero())
	}
	// Output: personal [poppy:read orders:write] [REDACTED] true
}

func ExampleStore_Blob() {
	ctx := context.Background()
	s, done := exampleStore(ctx)
	defer done()

	// Cache a translated OpenAPI catalog under its URL with the ETag it was
	// translated from; on the next start, reuse it if the ETag still matches.
	const url = "https://api.example.com/openapi.json"
	if _, _, err := s.Blob(ctx, url); errors.Is(err, store.ErrNotFound) {
		fmt.Println("not cached yet")
	}
	if err := s.PutBlob(ctx, url, `"v42"`, []byte("catalog bytes")); err != nil {
		log.Fatal(err)
	}
	etag, data, _ := s.Blob(ctx, url)
	fmt.Println(etag, string(data))
	// Output:
	// not cached yet
	// "v42" catalog bytes
}

func ExampleStore_ForUser() {
	ctx := context.Background()
	s, done := exampleStore(ctx)
	defer done()

	// A hosted agent keeps each person's records apart: the same Company
	// gives two people two User IDs, and a secret of one is not the other's.
	alice, bob := s.ForUser("local-user-1"), s.ForUser("local-user-2")
	a, _ := alice.UserID(ctx, "https://auth.example.com")
	b, _ := bob.UserID(ctx, "https://auth.example.com")
	_ = alice.PutSecret(ctx, "dpop/https://auth.example.com/"+a, []byte("alice's key"))
	_, err := bob.Secret(ctx, "dpop/https://auth.example.com/"+a)
	fmt.Println(a != b, errors.Is(err, store.ErrNotFound))
	// Output: true true
}

func ExampleOpenPostgres() {
	ctx := context.Background()
	// Every replica opens the same database with the same POPPY_STATE_KEY;
	// the password comes from PGPASSWORD or ~/.pgpass.
	s, err := store.OpenPostgres(ctx, "postgres://poppy@db.internal/poppy?search_path=agent", nil)
	if err != nil {
		log.Fatal(err) // without POPPY_STATE_KEY: an error matching store.ErrNoKey
	}
	defer s.Close()

	// A replica that must run one job at a time waits for its lease, woken by
	// the holder's release on any replica.
	l, err := s.WaitLease(ctx, "resend-pending", "replica-7", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer s.ReleaseLease(ctx, l)

	// And tells the others, which listen with s.Listen(ctx, "work").
	_ = s.Notify(ctx, "work", "conversation cnv_42 has news")
}
