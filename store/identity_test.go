package store

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestAgentMetadataRoundTrip: the metadata init stores is what a later
// Open reads, replaced as a whole by the next put.
func TestAgentMetadataRoundTrip(t *testing.T) { forEachBackend(t, testAgentMetadataRoundTrip) }

func testAgentMetadataRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, &Options{Key: testKey, Now: newClock().Now})
	if _, err := s.AgentMetadata(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AgentMetadata before any put: err = %v, want ErrNotFound", err)
	}
	want := AgentMetadata{ClientID: "https://agent.example/agent.json", ClientName: "My agent",
		JWKSURI: "https://agent.example/jwks.json", RedirectURIs: []string{"https://agent.example/oauth/callback"},
		Extensions: map[string]string{"com.example.ext": "1"}}
	if err := s.PutAgentMetadata(ctx, want); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := b.openAt(t, where, nil).ForUser("someone").AgentMetadata(ctx) // shared by everyone
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientID != want.ClientID || got.ClientName != want.ClientName || got.JWKSURI != want.JWKSURI ||
		!slices.Equal(got.RedirectURIs, want.RedirectURIs) || got.Extensions["com.example.ext"] != "1" || got.UpdatedAt.IsZero() {
		t.Errorf("AgentMetadata = %+v, want %+v", got, want)
	}
	s2 := b.openNew(t, nil)
	if err := s2.PutAgentMetadata(ctx, AgentMetadata{ClientID: want.ClientID, JWKSURI: want.JWKSURI}); err != nil {
		t.Fatal(err)
	}
	if err := s2.PutAgentMetadata(ctx, AgentMetadata{ClientID: "https://other.example/agent.json"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s2.AgentMetadata(ctx); err != nil || got.ClientID != "https://other.example/agent.json" || len(got.RedirectURIs) != 0 || got.Extensions == nil {
		t.Errorf("after a second put: %+v, %v", got, err)
	}
	if err := s2.PutAgentMetadata(ctx, AgentMetadata{}); err == nil {
		t.Error("metadata without a client_id was stored")
	}
}
