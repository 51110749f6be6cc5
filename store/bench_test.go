package store

import (
	"context"
	"testing"
)

// BenchmarkUserID measures the common case: the User ID exists already.
func BenchmarkUserID(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, b.TempDir(), nil)
	if _, err := s.UserID(ctx, "https://auth.example.com"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.UserID(ctx, "https://auth.example.com"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSecretRoundTrip stores and reads back a 256-byte secret: one
// committed write and one read, with encryption and decryption.
func BenchmarkSecretRoundTrip(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, b.TempDir(), nil)
	value := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.PutSecret(ctx, "dpop/https://auth.example.com/usr_a", value); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Secret(ctx, "dpop/https://auth.example.com/usr_a"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures opening an existing state directory, which every
// poppy-mcp start does.
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	openTest(b, dir, nil).Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(ctx, dir, &Options{Key: testKey})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
