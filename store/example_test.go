package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

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

func ExampleStore_UserID() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "poppy-state")
	defer os.RemoveAll(dir)
	s, err := store.Open(ctx, dir, &store.Options{Key: make([]byte, 32)})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

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
	// {"Issuer":"https://auth.example.com","UserID":"usr_Q7c1vK","Account":"personal","Scopes":null,"ExpiresAt":"0001-01-01T00:00:00Z","Token":"[REDACTED]"}
	// true
}
