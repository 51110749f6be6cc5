package poppytest

// This file routes every request the Server receives: by its host to the
// handlers registered there, after recording it and running the checks and
// faults that apply to every request.

import (
	"net"
	"net/http"
	"strings"
)

// router is the Server's concern of hosts and handlers. Its fields are
// guarded by the Server's mu.
type router struct {
	*Server
	hosts    []string                           // every host with handlers, in Hosts order
	handlers map[string]map[string]http.Handler // host -> pattern -> handler
	muxes    map[string]*http.ServeMux          // host -> mux built from handlers
}

// Hosts lists the hosts the Server answers for: Domain, www.Domain,
// auth.Domain, api.Domain, mcp.Domain, AgentHost, the same hosts of each of
// OtherDomains, then any added by Handle. On a shared Front, AgentHost is
// answered only once it serves something (see Start).
func (s *router) Hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hosts...)
}

// Handle registers h for pattern (an http.ServeMux pattern without a host,
// such as "POST /oauth/token") on host, replacing a handler registered
// before with the same pattern. A new host must be one of Domains, AgentHost
// or one of their subdomains, the names the certificate covers. Like ServeMux, it
// panics on a pattern that conflicts with another.
func (s *router) Handle(host, pattern string, h http.Handler) {
	host = strings.ToLower(host)
	if !s.tls.covers(host) {
		panic("poppytest: Handle: host " + host + " is not covered by the certificate")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started && !s.closed {
		if err := s.front.take(s.Server, host); err != nil {
			panic("poppytest: Handle: " + err.Error())
		}
	}
	s.addHost(host)
	s.handlers[host][pattern] = h
	mux := http.NewServeMux()
	for p, hh := range s.handlers[host] {
		mux.Handle(p, hh)
	}
	s.muxes[host] = mux
}

// HandleFunc is Handle for a function.
func (s *router) HandleFunc(host, pattern string, f func(http.ResponseWriter, *http.Request)) {
	s.Handle(host, pattern, http.HandlerFunc(f))
}

// addHost adds host to the served hosts; the caller holds mu or owns s.
func (s *router) addHost(host string) {
	if _, ok := s.handlers[host]; ok {
		return
	}
	s.hosts = append(s.hosts, host)
	s.handlers[host] = map[string]http.Handler{}
	s.muxes[host] = http.NewServeMux()
}

// ServeHTTP records the request, runs the checks that apply to every request,
// and routes it by host. An unknown host gets 421 Misdirected Request.
func (s *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := hostOnly(r.Host)
	s.record(r, host)
	defer s.finished(r)
	s.checkEveryRequest(r, host)
	if !s.opts.NoNonce && host != s.agentHost {
		w.Header().Set("DPoP-Nonce", s.nonce(host)) // RFC 9449 §8.2: a new nonce may come on any response
	}
	if s.checkRateLimit(w, r, host) || s.checkExtension(w, r, host) {
		return
	}
	s.mu.Lock()
	mux := s.muxes[host]
	s.mu.Unlock()
	if mux == nil {
		http.Error(w, "poppytest: no such host "+host, http.StatusMisdirectedRequest)
		return
	}
	mux.ServeHTTP(s.slowed(w, r, host), r)
}

// hostOnly lowercases a Host header and strips its port.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
