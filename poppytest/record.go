package poppytest

// This file records every request the Server receives, runs the checks that
// apply to every request, and reports the agent's protocol violations.

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// recorder is the Server's concern of what it saw: every request received,
// every violation found, every secret issued, and the counts of its
// answers. Its fields are guarded by the Server's mu.
type recorder struct {
	*Server
	reqs      []Request
	arriving  map[*http.Request]int // requests being served -> their index in reqs
	viols     []Violation
	secrets   []string            // IssuedSecrets, in order
	secretSet map[string]struct{} // the same, as a set
	served    map[string]int      // Served counters
}

// maxRecordedBody bounds how much of each request body is recorded. The
// handler still reads the whole body.
const maxRecordedBody = 1 << 20

// Request is one request the Server received, as recorded on arrival.
type Request struct {
	Host     string // without the port, lowercased
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte // at most the first 1 MiB
	Time     time.Time
}

// record appends r to the log, and remembers where while r is served, so a
// violation can summarize its body. It reads up to maxRecordedBody bytes of the
// body and puts them back in front of the rest, so handlers see it whole.
func (s *recorder) record(r *http.Request, host string) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		buf, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
		if err == nil || len(buf) > 0 {
			body = buf
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	}
	req := Request{Host: host, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Time: s.timeNow()}
	s.mu.Lock()
	s.arriving[r] = len(s.reqs)
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
}

// finished forgets r, recorded by record, once its answer is written.
func (s *recorder) finished(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.arriving, r)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Requests returns a copy of every request received, in order of arrival.
func (s *recorder) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Open returns a copy of the requests being served now (an event stream
// or a long-poll held open, an MCP GET stream), in order of arrival.
func (s *recorder) Open() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := slices.Sorted(maps.Values(s.arriving))
	out := make([]Request, 0, len(idx))
	for _, i := range idx {
		r := s.reqs[i]
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out = append(out, r)
	}
	return out
}

// Count is how many requests hit host (any port) at path (without a query).
func (s *recorder) Count(host, path string) int {
	host = hostOnly(host)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.Host == host && r.Path == path {
			n++
		}
	}
	return n
}

// addSecret remembers a token, assertion or code the Server issued or
// received, for IssuedSecrets and the URL check.
func (s *recorder) addSecret(v string) {
	if v == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secretSet[v]; !ok {
		s.secretSet[v] = struct{}{}
		s.secrets = append(s.secrets, v)
	}
}

// IssuedSecrets returns every token, assertion and code the Server issued or
// received so far, so a test can scan logs and tool results for leaks.
func (s *recorder) IssuedSecrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.secrets...)
}

// urlSecretParams are parameters that carry tokens, assertions or codes.
var urlSecretParams = []string{"access_token", "refresh_token", "token", "assertion",
	"client_assertion", "device_code", "code_verifier", "id_token", "dpop"}

// jwtLike matches a compact JWS or JWE: base64url segments, the first a JSON object.
var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)

// checkEveryRequest runs the checks that apply to every request to the
// Company. Requests to AgentHost are not the agent's, so they are skipped.
func (s *recorder) checkEveryRequest(r *http.Request, host string) {
	if host == s.agentHost {
		return
	}
	if where := s.secretInURL(r.URL); where != "" {
		// Poppy 0.1 §4.3: "Personal Agents MUST NOT send tokens in a URL"
		s.violate(r, "4.3", "", "%s %s%s carries a token or assertion in its URL (%s)", r.Method, host, r.URL.Path, where)
	}
}

// secretInURL says where u carries a secret: a secret-bearing parameter, a
// JWT-like value, or a secret the Server issued or received. Empty: none.
func (s *recorder) secretInURL(u *url.URL) string {
	q, _ := url.ParseQuery(u.RawQuery)
	for _, name := range urlSecretParams {
		if q.Has(name) {
			return "query parameter " + name
		}
	}
	full := u.EscapedPath() + "?" + u.RawQuery
	if unescaped, err := url.QueryUnescape(full); err == nil {
		full = unescaped
	}
	if jwtLike.MatchString(full) {
		return "a JWT"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		if len(v) >= 8 && strings.Contains(full, v) {
			return "a token the Company issued or received"
		}
	}
	return ""
}

// contextOf is r's context, or the background for a call outside a request.
func contextOf(r *http.Request) context.Context {
	if r == nil {
		return context.Background()
	}
	return r.Context()
}
