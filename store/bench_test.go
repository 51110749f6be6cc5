package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkStore measures the store calls every tool call makes, on each
// backend: go test -run='^$' -bench=BenchmarkStore ./store (PostgreSQL
// with POPPY_TEST_POSTGRES set). Each runs as a person of a hosted agent
// would (a ForUser view).
func BenchmarkStore(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			if be == postgresBackend {
				postgresDSN(b)
			}
			s := be.openNew(b, nil).ForUser("alice")
			for _, bench := range storeBenchmarks {
				b.Run(bench.name, func(b *testing.B) {
					b.ReportAllocs()
					bench.run(b, s)
				})
			}
		})
	}
}

const benchIssuer = "https://auth.example.com"

var storeBenchmarks = []struct {
	name string
	run  func(b *testing.B, s *Store)
}{
	// The common case: the User ID exists already.
	{"UserID", func(b *testing.B, s *Store) {
		ctx := context.Background()
		if _, err := s.UserID(ctx, benchIssuer); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.UserID(ctx, benchIssuer); err != nil {
				b.Fatal(err)
			}
		}
	}},
	// What a Session reads before each request it sends (companies.go).
	{"Generation", func(b *testing.B, s *Store) {
		ctx := context.Background()
		if _, err := s.CountSignOut(ctx, benchIssuer, true); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Generation(ctx, benchIssuer); err != nil {
				b.Fatal(err)
			}
		}
	}},
	// One committed upsert of a Session.
	{"PutSession", func(b *testing.B, s *Store) {
		ctx := context.Background()
		sess := Session{Issuer: benchIssuer, ID: "ses_1", UserID: "usr_a", SignedIn: true,
			Scopes: []string{"poppy:read", "orders:write"}, ExpiresAt: time.Now().Add(time.Hour)}
		for b.Loop() {
			if err := s.PutSession(ctx, sess); err != nil {
				b.Fatal(err)
			}
		}
	}},
	{"Sessions", func(b *testing.B, s *Store) {
		ctx := context.Background()
		for b.Loop() {
			if list, err := s.Sessions(ctx, benchIssuer); err != nil || len(list) == 0 {
				b.Fatal(list, err)
			}
		}
	}},
	// One event marked seen, as each event read does.
	{"MarkSeen", func(b *testing.B, s *Store) {
		ctx := context.Background()
		i := 0
		for b.Loop() {
			i++
			if err := s.MarkSeen(ctx, benchIssuer, "cnv_1", fmt.Sprintf("evt_%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	}},
	{"Seen", func(b *testing.B, s *Store) {
		ctx := context.Background()
		if err := s.MarkSeen(ctx, benchIssuer, "cnv_1", "evt_1"); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if seen, err := s.Seen(ctx, benchIssuer, "cnv_1", "evt_1"); err != nil || !seen {
				b.Fatal(seen, err)
			}
		}
	}},
	// A 256-byte secret stored and read back: encryption and decryption
	// with one write and one read.
	{"SecretRoundTrip", func(b *testing.B, s *Store) {
		ctx := context.Background()
		value := make([]byte, 256)
		for b.Loop() {
			if err := s.PutSecret(ctx, "dpop/https://auth.example.com/usr_a", value); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Secret(ctx, "dpop/https://auth.example.com/usr_a"); err != nil {
				b.Fatal(err)
			}
		}
	}},
	// A lease taken and given back, as around each Account Token refresh.
	{"LeaseAcquireRelease", func(b *testing.B, s *Store) {
		ctx := context.Background()
		for b.Loop() {
			l, err := s.AcquireLease(ctx, "account-token x", "holder", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.ReleaseLease(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	}},
}

// BenchmarkOpen measures opening an existing state, which every poppy-mcp
// start does.
func BenchmarkOpen(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			if be == postgresBackend {
				postgresDSN(b)
			}
			ctx := context.Background()
			where := be.fresh(b)
			be.openAt(b, where, nil).Close()
			b.ReportAllocs()
			for b.Loop() {
				s, err := be.open(ctx, where, &Options{Key: testKey})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}
