package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPages(t *testing.T) { forEachBackend(t, testPages) }

// testPages: a page put by one person's view is found by its hash through
// any view, with its owner; it is used up once, after which neither Page
// nor TakePage finds it; its state is sealed (the raw row holds neither
// the state nor the token); an expired page is found by neither.
func testPages(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	const token = "tok-0123456789abcdef"
	state := []byte("the page's state: a code verifier")
	if err := s.ForUser("alice").PutPage(ctx, Page{Hash: PageHash(token), Kind: "mediated", State: state, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Page(ctx, PageHash(token)) // the default user's view: pages are found by hash alone
	if err != nil || got.Owner != "alice" || got.Kind != "mediated" || !bytes.Equal(got.State, state) {
		t.Fatalf("Page = %+v, %v", got, err)
	}
	var raw []byte
	if err := b.raw(t, where).QueryRow(`SELECT state FROM pages`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, state) || bytes.Contains(raw, []byte("verifier")) {
		t.Error("the page's state is kept in clear")
	}
	if taken, err := s.TakePage(ctx, PageHash(token)); err != nil || !bytes.Equal(taken.State, state) || taken.Owner != "alice" {
		t.Fatalf("TakePage = %+v, %v", taken, err)
	}
	if _, err := s.TakePage(ctx, PageHash(token)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a second TakePage: %v, want ErrNotFound", err)
	}
	if _, err := s.Page(ctx, PageHash(token)); !errors.Is(err, ErrNotFound) {
		t.Errorf("Page after TakePage: %v, want ErrNotFound", err)
	}
	if err := s.PutPage(ctx, Page{Hash: PageHash("old"), Kind: "join", State: []byte("x"), ExpiresAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Page(ctx, PageHash("old")); !errors.Is(err, ErrNotFound) {
		t.Errorf("an expired page: %v, want ErrNotFound", err)
	}
	if _, err := s.TakePage(ctx, PageHash("old")); !errors.Is(err, ErrNotFound) {
		t.Errorf("taking an expired page: %v, want ErrNotFound", err)
	}
}

func TestPageMovedToAnotherPerson(t *testing.T) { forEachBackend(t, testPageMovedToAnotherPerson) }

// testPageMovedToAnotherPerson: a page's row given another owner in the
// database does not open: its state is sealed to the person it was
// opened for.
func testPageMovedToAnotherPerson(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	if err := s.ForUser("alice").PutPage(ctx, Page{Hash: PageHash("t"), Kind: "k", State: []byte("alice's"), ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.exec(t, b.raw(t, where), `UPDATE pages SET local_user = ?`, "mallory")
	if _, err := s.Page(ctx, PageHash("t")); !errors.Is(err, ErrWrongKey) {
		t.Errorf("a page moved to mallory: %v, want ErrWrongKey", err)
	}
}

func TestPageTakenOnce(t *testing.T) { forEachBackend(t, testPageTakenOnce) }

// testPageTakenOnce: two Stores on one state (two replicas), four
// requests each, race to take one page: exactly one gets it.
func testPageTakenOnce(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	stores := []*Store{b.openAt(t, where, nil), b.openAt(t, where, nil)}
	if err := stores[0].PutPage(ctx, Page{Hash: PageHash("once"), Kind: "join", State: []byte("s"), ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 4 {
			wg.Go(func() {
				_, err := s.TakePage(ctx, PageHash("once"))
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, ErrNotFound):
					lost.Add(1)
				default:
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 7 {
		t.Errorf("%d requests took the page and %d did not, want 1 and 7", won.Load(), lost.Load())
	}
}
