// Package pages serves poppy-mcp's one-time local pages (TOOLS.md "Local
// pages"): steps that need a browser and never the model, such as joining the
// agent's browser to a Session (Poppy 0.1 §5) or typing credentials for
// Mediated Sign-In (§4.7). Each page lives at a URL with an unguessable
// token, expires after use or a few minutes, and every response is
// Cache-Control: no-store.
package pages

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Addr is where to listen. Zero: "127.0.0.1:0" (a random loopback port).
	Addr string
	// PublicURL, when set, is the base URL the pages are reachable at (HTTP
	// mode behind --public-url); the Server then does not listen itself and
	// Handler must be mounted at PublicURL's path.
	PublicURL string
	// TTL is how long an unused page stays open. Zero: 5 minutes.
	TTL time.Duration
}

// Handler serves one page. It calls done when the page has served its purpose;
// from then on its URL answers 410 Gone.
type Handler func(w http.ResponseWriter, r *http.Request, done func())

// Server serves pages. It is safe for concurrent use.
type Server struct {
	base string
	// origin is PublicURL's scheme and host: behind a reverse proxy the Host
	// header may be rewritten, so form posts are checked against it.
	origin string
	ttl    time.Duration
	ln     net.Listener
	srv    *http.Server
	now    func() time.Time

	mu    sync.Mutex
	pages map[string]*page // by token; guarded by mu
}

type page struct {
	h       Handler
	expires time.Time
}

// New starts a Server.
func New(opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{ttl: opts.TTL, pages: map[string]*page{}, now: time.Now}
	if s.ttl <= 0 {
		s.ttl = 5 * time.Minute
	}
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("pages: PublicURL %q is not an absolute URL", opts.PublicURL)
		}
		s.base, s.origin = strings.TrimSuffix(opts.PublicURL, "/"), u.Scheme+"://"+u.Host
		return s, nil
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pages: listening on %s: %w", addr, err)
	}
	s.ln, s.base = ln, "http://"+ln.Addr().String()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the listener and forgets every page.
func (s *Server) Close() error {
	s.mu.Lock()
	s.pages = map[string]*page{}
	s.mu.Unlock()
	if s.srv != nil {
		return s.srv.Close()
	}
	return nil
}

// BaseURL is where the pages are served from.
func (s *Server) BaseURL() string { return s.base }

// Open serves h at a new one-time URL, valid for ttl (zero: the Server's TTL),
// and returns the URL and a function that closes the page early.
func (s *Server) Open(h Handler, ttl time.Duration) (string, func()) {
	if ttl <= 0 {
		ttl = s.ttl
	}
	b := make([]byte, 32)
	rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.pages[token] = &page{h: h, expires: s.now().Add(ttl)}
	s.gcLocked()
	s.mu.Unlock()
	return s.base + "/p/" + token, func() { s.close(token) }
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

// Handler serves the pages; mount it at the PublicURL's path in HTTP mode.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

var errGone = errors.New("this link has expired or was already used")

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	if s.ln != nil && !s.loopbackHost(r.Host) {
		// A DNS-rebinding page could otherwise reach the loopback listener.
		http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
		return
	}
	_, token, ok := strings.Cut(r.URL.Path, "/p/")
	if !ok || token == "" || strings.Contains(token, "/") {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Method == http.MethodPost && !s.sameOrigin(r) {
		http.Error(w, "forbidden: the form must be posted from its own page", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	p := s.pages[token]
	if p != nil && s.now().After(p.expires) {
		delete(s.pages, token)
		p = nil
	}
	s.mu.Unlock()
	if p == nil {
		Message(w, http.StatusGone, "Link expired", errGone.Error()+". Ask your assistant for a new one.")
		return
	}
	p.h(w, r, func() { s.close(token) })
}

// loopbackHost accepts only the listener's own address or localhost.
func (s *Server) loopbackHost(host string) bool {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return host == s.ln.Addr().String() || host == "localhost:"+port
}

// sameOrigin rejects a cross-site POST: browsers send Origin on form posts.
// Behind --public-url it must be the public origin; on loopback, the Host.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	switch {
	case origin == "" || origin == "null":
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "" || site == "same-origin"
	case s.origin != "":
		return strings.EqualFold(origin, s.origin)
	default:
		return strings.TrimPrefix(strings.TrimPrefix(origin, "http://"), "https://") == r.Host
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
