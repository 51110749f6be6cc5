// Package pages serves poppy-mcp's one-time local pages: steps that need a
// browser and never the model, such as joining the agent's browser to a
// Session (Poppy 0.1 §5) or typing credentials for Mediated Sign-In (§4.7).
// Each page lives at a URL with an unguessable token, expires after use or a
// few minutes, and every response is Cache-Control: no-store.
//
// A page is bound to the person who asked for it. Pages for the agent's own
// browser (Open) are served only on a loopback listener, so the machine
// boundary keeps everyone else out. Pages for the user's browser (OpenForUser)
// are served there too, unless the Server has a PublicURL: then they are
// served under it, and a Gate decides whose browser may open them: each such
// page knows the person it was opened for, its owner.
//
// A page's handler is a closure (Open, OpenForUser), held by the process
// that opened it, or a kind with a state (OpenKind, OpenKindForUser:
// kinds.go), kept in the store when the Server has one, which every
// replica sharing the store serves.
package pages

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Addr is where the loopback listener listens; it must be a loopback
	// address. Zero: "127.0.0.1:0" (a random loopback port).
	Addr string
	// Listener, when set, is the loopback listener, in place of listening
	// on Addr: an in-memory one, for tests that run in a testing/synctest
	// bubble (docs/architecture.md, "Time in tests"). Its address must be
	// a loopback one. Nil: listen on Addr.
	Listener net.Listener
	// PublicURL, when set, is the base URL the user's pages are reachable at
	// (HTTP mode behind --public-url): Handler serves them and must be
	// mounted at PublicURL's path. Zero: every page is on the loopback
	// listener.
	PublicURL string
	// Gate decides who may open a page served under PublicURL. Zero: no
	// one, every such page answers 403; set it whenever PublicURL is set.
	Gate Gate
	// TTL is how long an unused page stays open. Zero: 5 minutes.
	TTL time.Duration
	// Store is where the pages of a kind (OpenKind, Keep) are kept, so
	// that every replica sharing it serves them. Nil: this process's
	// memory.
	Store *store.Store
	// Logger receives what the pages could not read from the store. Nil
	// discards it.
	Logger *slog.Logger
}

// Handler serves one page. It calls done when the page has served its purpose;
// from then on its URL answers 410 Gone.
type Handler func(w http.ResponseWriter, r *http.Request, done func())

// Server serves pages. It is safe for concurrent use.
type Server struct {
	local string // the loopback listener's base URL
	// public is PublicURL without a trailing slash; origin its scheme and
	// host, and host its host (without a default port), the only Host a
	// public page answers for.
	public, origin, scheme, host string
	gate                         Gate
	ttl                          time.Duration
	ln                           net.Listener
	srv                          *http.Server
	now                          func() time.Time
	table                        table // the pages of a kind
	log                          *slog.Logger

	mu    sync.Mutex
	pages map[string]*page // by token; guarded by mu
	kinds kindHandlers     // guarded by mu
}

// kindHandlers are the handlers of the kinds of page, by kind.
type kindHandlers map[string]KindHandler

type page struct {
	h       Handler
	expires time.Time
	public  bool   // served under PublicURL, not on the loopback listener
	owner   string // the person it was opened for; the Gate compares
}

// New starts a Server's loopback listener.
func New(opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{ttl: opts.TTL, gate: opts.Gate, pages: map[string]*page{}, kinds: kindHandlers{}, now: time.Now, log: opts.Logger}
	if s.ttl <= 0 {
		s.ttl = 5 * time.Minute
	}
	if s.log == nil {
		s.log = discard
	}
	s.table = &memTable{now: func() time.Time { return s.now() }, pages: pagesByHash{}}
	if opts.Store != nil {
		s.table = storeTable{opts.Store}
	}
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("pages: PublicURL %q is not an absolute URL", opts.PublicURL)
		}
		s.public, s.origin = strings.TrimSuffix(opts.PublicURL, "/"), u.Scheme+"://"+u.Host
		s.scheme, s.host = u.Scheme, canonicalHost(u.Scheme, u.Host)
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if !IsLoopback(addr) {
		return nil, fmt.Errorf("pages: %s is not a loopback address: pages for the agent's own browser stay on this machine", addr)
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("pages: listening on %s: %w", addr, err)
		}
	}
	s.ln, s.local = ln, "http://"+ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveLoopback), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// IsLoopback reports whether addr, a HOST:PORT, names only the loopback
// interface: localhost or a loopback IP.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close stops the listener and forgets every page held in memory; the
// pages kept in the store stay open for the other replicas.
func (s *Server) Close() error {
	s.mu.Lock()
	s.pages = map[string]*page{}
	s.mu.Unlock()
	return s.srv.Close()
}

// BaseURL is where the user's pages are served from: PublicURL when set,
// else the loopback listener.
func (s *Server) BaseURL() string {
	if s.public != "" {
		return s.public
	}
	return s.local
}

// LoopbackURL is the loopback listener's base URL, where Open's pages are.
func (s *Server) LoopbackURL() string { return s.local }

// Open serves h at a new one-time URL on the loopback listener, valid for
// ttl (zero: the Server's TTL), and returns the URL and a function that
// closes the page early. Such a page is for a browser on this machine, the
// agent's own (Poppy 0.1 §5): it is never served under PublicURL.
func (s *Server) Open(h Handler, ttl time.Duration) (string, func()) {
	return s.open(h, ttl, false, "")
}

// OpenForUser serves h at a new one-time URL for the browser of owner, the
// person who asked for it (the local user's key; "" in one person's
// deployment): under PublicURL, behind the Gate, which admits only owner's
// browser, when the Server has one; otherwise on the loopback listener,
// like Open.
func (s *Server) OpenForUser(owner string, h Handler, ttl time.Duration) (string, func()) {
	return s.open(h, ttl, s.public != "", owner)
}

func (s *Server) open(h Handler, ttl time.Duration, public bool, owner string) (string, func()) {
	if ttl <= 0 {
		ttl = s.ttl
	}
	token := newToken()
	s.mu.Lock()
	s.pages[token] = &page{h: h, expires: s.now().Add(ttl), public: public, owner: owner}
	s.gcLocked()
	s.mu.Unlock()
	base := s.local
	if public {
		base = s.public
	}
	return base + "/p/" + token, func() { s.close(token) }
}

// newToken is a page's token: 256 random bits, base64url.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) close(token string) {
	s.mu.Lock()
	delete(s.pages, token)
	s.mu.Unlock()
}

// gcLocked drops expired pages; s.mu is held.
func (s *Server) gcLocked() {
	now := s.now()
	for t, p := range s.pages {
		if now.After(p.expires) {
			delete(s.pages, t)
		}
	}
}

// Handler serves the pages opened for the user under PublicURL; mount it at
// PublicURL's path. Without a PublicURL it serves nothing.
func (s *Server) Handler() http.Handler {
	return s.CheckHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.public == "" {
			http.NotFound(w, r)
			return
		}
		s.serve(w, r, true)
	}))
}

// LoopbackHandler is what the loopback listener serves: the pages not
// opened for PublicURL, for a request whose Host is the listener's.
func (s *Server) LoopbackHandler() http.Handler { return http.HandlerFunc(s.serveLoopback) }

// CheckHost wraps a handler served under PublicURL (a page, the Direct
// Sign-In callback): it sets the headers every page gets and refuses a
// request whose Host is not PublicURL's, as a DNS-rebinding page's would be.
// A reverse proxy in front must pass the Host header through.
func (s *Server) CheckHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w.Header())
		if s.host == "" || canonicalHost(s.scheme, r.Host) != s.host {
			Message(w, http.StatusMisdirectedRequest, "Wrong address",
				"This page is served for "+s.host+" only. If a reverse proxy is in front of poppy-mcp, it must pass the Host header through.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalHost lowercases a host[:port] and drops the scheme's default port.
func canonicalHost(scheme, hostport string) string {
	h := strings.ToLower(hostport)
	if host, port, err := net.SplitHostPort(h); err == nil && (scheme == "https" && port == "443" || scheme == "http" && port == "80") {
		h = host
		if strings.Contains(host, ":") {
			h = "[" + host + "]"
		}
	}
	return h
}

var errGone = errors.New("this link has expired or was already used")

// serveLoopback serves the loopback listener: pages not opened for PublicURL.
func (s *Server) serveLoopback(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	if !s.loopbackHost(r.Host) {
		// A DNS-rebinding page could otherwise reach the loopback listener.
		Message(w, http.StatusMisdirectedRequest, "Wrong address", "This page is served on "+s.ln.Addr().String()+" only.")
		return
	}
	s.serve(w, r, false)
}

// serve finds the page of the URL's token among those served on this
// surface (public or loopback), lets the Gate admit a public page's
// visitor, and hands the request to the page.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, public bool) {
	_, token, ok := strings.Cut(r.URL.Path, "/p/")
	if !ok || token == "" || strings.Contains(token, "/") {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Method == http.MethodPost && !s.sameOrigin(r, public) {
		http.Error(w, "forbidden: the form must be posted from its own page", http.StatusForbidden)
		return
	}
	p := s.lookup(token, public)
	if p == nil {
		if !s.serveKind(w, r, token, public) {
			Gone(w)
		}
		return
	}
	if public && !s.admit(w, r, p.owner) {
		return
	}
	p.h(w, r, func() { s.close(token) })
}

// Gone answers that a page has expired or was used already: 410.
func Gone(w http.ResponseWriter) {
	Message(w, http.StatusGone, "Link expired", errGone.Error()+". Ask your assistant for a new one.")
}

// admit lets the Gate decide whether r's browser may open a public page
// opened for owner; when it may not, r has been answered.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, owner string) bool {
	if s.gate == nil {
		Message(w, http.StatusForbidden, "Not available", "This poppy-mcp does not say who may open its pages.")
		return false
	}
	return s.gate.Admit(w, r, owner)
}

// lookup returns the open page of token served on the surface asked for.
func (s *Server) lookup(token string, public bool) *page {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pages[token]
	if p != nil && s.now().After(p.expires) {
		delete(s.pages, token)
		p = nil
	}
	if p == nil || p.public != public {
		return nil
	}
	return p
}

// loopbackHost accepts only the listener's own address or localhost.
func (s *Server) loopbackHost(host string) bool {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return host == s.ln.Addr().String() || host == "localhost:"+port
}

// sameOrigin rejects a cross-site POST: browsers send Origin on form posts.
// Under PublicURL it must be the public origin; on loopback, the Host.
func (s *Server) sameOrigin(r *http.Request, public bool) bool {
	origin := r.Header.Get("Origin")
	switch {
	case origin == "" || origin == "null":
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "" || site == "same-origin"
	case public:
		return strings.EqualFold(origin, s.origin)
	default:
		return origin == "http://"+r.Host
	}
}

// secureHeaders are sent on every page: no caching, no referrer (the URL is a
// capability), no framing.
func secureHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
}

var messageTmpl = template.Must(template.New("msg").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

// Message writes a small HTML page with a title and a sentence.
func Message(w http.ResponseWriter, status int, title, text string) {
	secureHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	messageTmpl.Execute(w, struct{ Title, Text string }{title, text})
}
