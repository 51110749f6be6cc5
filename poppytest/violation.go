package poppytest

// This file records the agent's protocol violations as data: the section of
// the spec broken, the rule, the error the Company answered, and the request
// that broke it, summarized without any token, assertion, code or
// credential, so a program outside Go (poppytest serve) can report them.
// Each is also reported to T, as a test failure, with the same words as ever.

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Violation is one protocol violation by the agent under test.
type Violation struct {
	// Seq is the violation's place among the Server's, from 1.
	Seq int `json:"seq"`
	// Section is the section of Poppy 0.1 the agent broke, such as "4.3".
	// Rules of the RFCs the spec builds on are filed under the section
	// that uses them (a DPoP proof's under 4.3).
	Section string `json:"section"`
	// Rule says what the agent did wrong, with any secret redacted.
	Rule string `json:"rule"`
	// Code is the error the Company answered with, such as
	// "invalid_dpop_proof"; "" when it answered as usual.
	Code string `json:"code,omitempty"`
	// Request is the request that broke the rule; its fields are empty for
	// a violation found outside a request.
	Request ViolationRequest `json:"request"`
	Time    time.Time        `json:"time"`
}

// ViolationRequest is the request of a Violation, with every token,
// assertion, code and credential left out.
type ViolationRequest struct {
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"` // without the port, lowercased
	Path   string `json:"path,omitempty"`
	// Summary is the rest, redacted: the query, the Authorization scheme,
	// the number of DPoP proofs, the Content-Type, and the names of the
	// form or JSON fields, with the values of those that are never secret
	// (grant_type, scope, resource, ...).
	Summary string `json:"summary,omitempty"`
}

// String is the message reported to T:
// "poppytest: agent violated Poppy 0.1 §4.3: ... (answered invalid_token)".
func (v Violation) String() string {
	msg := "poppytest: agent violated Poppy 0.1 §" + v.Section + ": " + v.Rule
	if v.Code != "" {
		msg += " (answered " + v.Code + ")"
	}
	return msg
}

// redacted stands in for a value a violation must not show.
const redacted = "[redacted]"

// publicParams are the form and query parameters whose values are never
// secret, so a violation's summary shows them.
var publicParams = []string{"grant_type", "client_assertion_type", "scope", "resource", "response_type",
	"token_type_hint", "code_challenge_method", "session_id", "client_id", "redirect_uri"}

// violate records a violation of section by the request r (nil: none),
// answered with code ("": none), and reports it to T unless the Server is
// closed.
func (s *recorder) violate(r *http.Request, section, code, format string, args ...any) {
	v := Violation{Section: section, Code: code, Time: s.timeNow()}
	v.Rule = s.redactSecrets(fmt.Sprintf(format, args...))
	if r != nil {
		v.Request = s.summarize(r)
	}
	s.mu.Lock()
	v.Seq = len(s.viols) + 1
	s.viols = append(s.viols, v)
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		s.t.Helper()
		s.t.Errorf("%s", v)
	}
}

// Violations returns every violation found so far, in order, as the
// messages reported to T.
func (s *recorder) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.viols))
	for i, v := range s.viols {
		out[i] = v.String()
	}
	return out
}

// ViolationRecords returns every violation found so far, in order.
func (s *recorder) ViolationRecords() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.viols)
}

// summarize describes r without its secrets. The body is the one recorded
// on arrival, when r is the request ServeHTTP recorded.
func (s *recorder) summarize(r *http.Request) ViolationRequest {
	out := ViolationRequest{Method: r.Method, Host: hostOnly(r.Host), Path: r.URL.Path}
	var parts []string
	if r.URL.RawQuery != "" {
		q, _ := url.ParseQuery(r.URL.RawQuery)
		parts = append(parts, "query "+publicValues(q))
	}
	if a := r.Header.Values("Authorization"); len(a) > 0 {
		scheme, _, _ := strings.Cut(a[0], " ")
		if len(scheme) > 12 || strings.ContainsAny(scheme, ".=-_") {
			scheme = redacted
		}
		parts = append(parts, fmt.Sprintf("Authorization %s %s (%d header(s))", scheme, redacted, len(a)))
	}
	if n := len(r.Header.Values("DPoP")); n > 0 {
		parts = append(parts, fmt.Sprintf("DPoP proofs %d", n))
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		parts = append(parts, "Content-Type "+ct)
	}
	if fields := bodyFields(r.Header.Get("Content-Type"), s.recordedBody(r)); fields != "" {
		parts = append(parts, fields)
	}
	out.Summary = s.redactSecrets(strings.Join(parts, "; "))
	return out
}

// recordedBody is the body recorded for r on arrival, or nil.
func (s *recorder) recordedBody(r *http.Request) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.arriving[r]; ok && i < len(s.reqs) {
		return s.reqs[i].Body
	}
	return nil
}

// bodyFields names the fields of a form or JSON object body, with the
// values of public form fields.
func bodyFields(contentType string, body []byte) string {
	if len(body) == 0 {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return "form (not form-encoded)"
		}
		return "form " + publicValues(form)
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return "JSON (not an object)"
		}
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		slices.Sort(names)
		return "JSON fields " + strings.Join(names, ",")
	}
	return fmt.Sprintf("body %d bytes", len(body))
}

// publicValues lists the parameters of v, sorted, showing the values of
// publicParams only.
func publicValues(v url.Values) string {
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		val := redacted
		if slices.Contains(publicParams, k) && len(v[k]) == 1 {
			val = v[k][0]
		}
		if len(v[k]) > 1 {
			val = fmt.Sprintf("%s (%d times)", redacted, len(v[k]))
			if slices.Contains(publicParams, k) {
				val = strings.Join(v[k], "|")
			}
		}
		parts[i] = url.QueryEscape(k) + "=" + val
	}
	return strings.Join(parts, "&")
}

// redactSecrets replaces every JWT and every secret the Server issued or
// received (of 8 characters or more) in text. The caller must not hold mu.
func (s *recorder) redactSecrets(text string) string {
	text = jwtLike.ReplaceAllString(text, redacted)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.secrets {
		if len(v) >= 8 && strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, redacted)
		}
	}
	return text
}
