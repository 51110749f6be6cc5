package pages

// This file serves the pages whose state is kept, not held in a closure:
// each page has a kind, whose handler every process registers (Handle),
// and a state the handler reads back. With Options.Store the pages are
// kept in the store, so whichever replica a load balancer picks serves a
// page another replica opened: it finds the page by the hash of its token
// (the token is never kept), lets the Gate admit its owner's browser, and
// runs the kind's handler, which does its work for the page's person on
// this replica. A page is used up by one statement (Page.Take), so two
// replicas never both use it.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// KindHandler serves every page of one kind (Server.Handle).
type KindHandler func(w http.ResponseWriter, r *http.Request, p *Page)

// Page is an open page of a kind, as a request to it finds it. Its fields
// are the ones it was opened with; a handler changes them with Keep.
type Page struct {
	// Owner is the person it was opened for (the local user key; "" in one
	// person's deployment).
	Owner string
	// State is what its handler needs: a secret, never logged.
	State []byte
	// Expires is when it stops opening.
	Expires time.Time

	s      *Server
	kind   string
	hash   string
	public bool
}

// Take uses the page up: it reports true to the one request, on this
// replica or any other, that gets it; every other request is told the
// page has gone (410), as after its expiry.
func (p *Page) Take(ctx context.Context) bool {
	_, err := p.s.table.take(ctx, p.hash)
	return err == nil
}

// Keep puts a page taken (Take) back with state, till the same expiry:
// the page goes on to its next step.
func (p *Page) Keep(ctx context.Context, state []byte) error {
	p.State = state
	return p.s.table.put(ctx, p.Owner, p.record())
}

// Close closes the page: its URL answers 410 from then on, on every
// replica.
func (p *Page) Close(ctx context.Context) { _ = p.s.table.del(ctx, p.hash) }

// record is the page as the table keeps it: its surface is the first
// byte of the state kept.
func (p *Page) record() store.Page {
	surface := byte('l')
	if p.public {
		surface = 'p'
	}
	return store.Page{Hash: p.hash, Kind: p.kind, State: append([]byte{surface}, p.State...), ExpiresAt: p.Expires}
}

// pageOf reads a kept page back.
func (s *Server) pageOf(rec store.Page) (*Page, bool) {
	if len(rec.State) == 0 {
		return nil, false
	}
	return &Page{Owner: rec.Owner, State: rec.State[1:], Expires: rec.ExpiresAt, s: s, kind: rec.Kind,
		hash: rec.Hash, public: rec.State[0] == 'p'}, true
}

// Handle makes h serve the pages of kind. Register every kind before
// serving: a page of a kind this process does not know answers 410.
func (s *Server) Handle(kind string, h KindHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds[kind] = h
}

// OpenKind opens a page of kind with state on the loopback listener, for
// the agent's own browser (like Open) acting for owner (no Gate asks who
// opens it), valid for ttl (zero: the Server's TTL). It returns the
// page's URL and a function that closes it early.
func (s *Server) OpenKind(ctx context.Context, owner, kind string, state []byte, ttl time.Duration) (string, func(), error) {
	return s.openKind(ctx, owner, kind, state, ttl, false)
}

// OpenKindForUser opens a page of kind with state for the browser of
// owner, where OpenForUser would serve it: under PublicURL behind the
// Gate when the Server has one.
func (s *Server) OpenKindForUser(ctx context.Context, owner, kind string, state []byte, ttl time.Duration) (string, func(), error) {
	return s.openKind(ctx, owner, kind, state, ttl, s.public != "")
}

func (s *Server) openKind(ctx context.Context, owner, kind string, state []byte, ttl time.Duration, public bool) (string, func(), error) {
	token := newToken()
	closeIt, err := s.Keep(ctx, owner, kind, token, state, ttl, public)
	if err != nil {
		return "", nil, err
	}
	base := s.local
	if public {
		base = s.public
	}
	return base + "/p/" + token, closeIt, nil
}

// Keep keeps a record of kind with state for owner under token, a secret
// the caller made (a Direct Sign-In's state, say), valid for ttl: Find
// finds it on any replica. It is a page of the public surface when public
// is set. It returns a function that closes it early.
func (s *Server) Keep(ctx context.Context, owner, kind, token string, state []byte, ttl time.Duration, public bool) (func(), error) {
	if ttl <= 0 {
		ttl = s.ttl
	}
	p := &Page{Owner: owner, State: state, Expires: s.now().Add(ttl), s: s, kind: kind, hash: store.PageHash(token), public: public}
	if err := s.table.put(ctx, owner, p.record()); err != nil {
		return nil, err
	}
	return func() { p.Close(context.WithoutCancel(ctx)) }, nil
}

// Find returns the open record of kind kept under token (Keep), or false.
func (s *Server) Find(ctx context.Context, kind, token string) (*Page, bool) {
	rec, err := s.table.get(ctx, store.PageHash(token))
	if err != nil || rec.Kind != kind {
		return nil, false
	}
	return s.pageOf(rec)
}

// serveKind serves the kept page of token, if there is one on this
// surface; it reports false when there is none.
func (s *Server) serveKind(w http.ResponseWriter, r *http.Request, token string, public bool) bool {
	rec, err := s.table.get(r.Context(), store.PageHash(token))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.WarnContext(r.Context(), "pages: cannot read a page from the store", "err", err)
		Message(w, http.StatusServiceUnavailable, "Try again", "poppy-mcp cannot open this page just now. Try again in a moment.")
		return true
	}
	p, ok := s.pageOf(rec)
	s.mu.Lock()
	h := s.kinds[rec.Kind]
	s.mu.Unlock()
	if err != nil || !ok || h == nil || p.public != public {
		return false
	}
	if public && !s.admit(w, r, p.Owner) {
		return true
	}
	h(w, r, p)
	return true
}

// table is where kept pages are: the store, or this process's memory.
type table interface {
	put(ctx context.Context, owner string, p store.Page) error
	get(ctx context.Context, hash string) (store.Page, error)
	take(ctx context.Context, hash string) (store.Page, error)
	del(ctx context.Context, hash string) error
}

// storeTable keeps pages in the store, for every replica.
type storeTable struct{ st *store.Store }

func (t storeTable) put(ctx context.Context, owner string, p store.Page) error {
	return t.st.ForUser(owner).PutPage(ctx, p)
}
func (t storeTable) get(ctx context.Context, hash string) (store.Page, error) {
	return t.st.Page(ctx, hash)
}
func (t storeTable) take(ctx context.Context, hash string) (store.Page, error) {
	return t.st.TakePage(ctx, hash)
}
func (t storeTable) del(ctx context.Context, hash string) error { return t.st.DeletePage(ctx, hash) }

// memTable keeps pages in this process's memory, without a store. It is
// safe for concurrent use.
type memTable struct {
	now   func() time.Time
	mu    sync.Mutex
	pages pagesByHash // guarded by mu
}

// pagesByHash are the pages of a memTable.
type pagesByHash map[string]store.Page

func (t *memTable) put(_ context.Context, owner string, p store.Page) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, old := range t.pages {
		if !t.now().Before(old.ExpiresAt) {
			delete(t.pages, h)
		}
	}
	p.Owner = owner
	t.pages[p.Hash] = p
	return nil
}

func (t *memTable) get(_ context.Context, hash string) (store.Page, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pages[hash]
	if !ok || !t.now().Before(p.ExpiresAt) {
		return store.Page{}, store.ErrNotFound
	}
	return p, nil
}

func (t *memTable) take(_ context.Context, hash string) (store.Page, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pages[hash]
	delete(t.pages, hash)
	if !ok || !t.now().Before(p.ExpiresAt) {
		return store.Page{}, store.ErrNotFound
	}
	return p, nil
}

func (t *memTable) del(_ context.Context, hash string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pages, hash)
	return nil
}

// discard is the logger of a Server given none.
var discard = slog.New(slog.DiscardHandler)
