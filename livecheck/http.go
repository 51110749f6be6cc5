package livecheck

// This file sends the probes: one attempt (do) that honours the 429 holds
// (Poppy 0.1 §4.3) and spends the run's budget, and the small policy around
// it (send) that waits out one 429 and answers one use_dpop_nonce with the
// nonce it names (RFC 9449 §8, §9), keeping what each answer says about the
// Company's nonces for the nonce checks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// maxBody bounds how much of an answer is read.
const maxBody = 256 << 10

// errSpent is the budget's answer once the run's requests are spent.
var errSpent = errors.New("livecheck: the run's requests are spent")

// budget is the RoundTripper every request of a run goes through: it
// counts them, and refuses to send past max. It is safe for concurrent use.
type budget struct {
	next http.RoundTripper
	max  int

	// mu guards n.
	mu sync.Mutex
	n  int
}

func (b *budget) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	ok := b.n < b.max
	if ok {
		b.n++
	}
	b.mu.Unlock()
	if !ok {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errSpent
	}
	return b.next.RoundTrip(req)
}

func (b *budget) used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *budget) left() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max - b.n
}

// rateLimitedError is a request not sent: its endpoint is held by a 429
// longer than Options.MaxWait, or was limited again after the wait.
type rateLimitedError struct {
	wait     time.Duration
	endpoint string
}

func (e *rateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: %s asks to wait %d s (Retry-After)", e.endpoint, int64(math.Ceil(e.wait.Seconds())))
}

// exchange is one request sent and the answer to it.
type exchange struct {
	method string
	url    string // without the query, which may hold what must not be shown
	status int
	header http.Header
	body   []byte // at most maxBody
}

// what is "METHOD URL", for messages.
func (x *exchange) what() string { return x.method + " " + x.url }

// do sends req once: after any hold on its endpoint, within the budget,
// bounded by Options.Timeout.
func (r *run) do(ctx context.Context, req *http.Request) (*exchange, error) {
	ep := retryafter.Endpoint(req.URL)
	if d := r.holds.Remaining(ep, time.Now()); d > 0 {
		if d > r.c.opts.MaxWait {
			return nil, &rateLimitedError{wait: d, endpoint: ep}
		}
		// Poppy 0.1 §4.3: "The Personal Agent MUST wait at least that long before sending the request again."
		if err := retryafter.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.opts.Timeout)
	defer cancel()
	x := &exchange{method: req.Method, url: shown(req.URL)}
	resp, err := r.hc.Do(req.WithContext(ctx))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, query and all
		}
		if errors.Is(err, errSpent) {
			return nil, errSpent
		}
		return nil, fmt.Errorf("livecheck: %s: %w", x.what(), err)
	}
	defer resp.Body.Close()
	r.holds.Observe(resp, time.Now())
	x.status, x.header = resp.StatusCode, resp.Header
	if x.body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody)); err != nil {
		return nil, fmt.Errorf("livecheck: %s: reading the answer: %w", x.what(), err)
	}
	return x, nil
}

// shown is u without its query and fragment.
func shown(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return v.String()
}

// origin is scheme://host[:port] of a URL, the key of its nonce.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// builder makes a request for the origin's latest nonce ("" when none).
// It is called again for a retry, so each attempt has a fresh proof.
type builder func(nonce string) (*http.Request, error)

// nonceEvent is one use_dpop_nonce answer to a probe.
type nonceEvent struct {
	origin      string
	endpoint    string // the request's URL without query, as retryafter keys it
	inChallenge bool   // the code came in WWW-Authenticate, as RFC 9449 §9 has resources send it
	named       bool   // DPoP-Nonce named a nonce
	retried     bool   // the probe was sent again with it
	after       *exchange
}

// send sends the request build makes for target's origin. A 429 is waited
// out and the request sent once more (Poppy 0.1 §4.3); a use_dpop_nonce
// answer that names a nonce is answered once, at once, with it when
// nonceRetry is set (RFC 9449 §8: "the client ... retries the request with
// the new nonce").
func (r *run) send(ctx context.Context, target string, build builder, nonceRetry bool) (*exchange, error) {
	o := origin(target)
	ev, limited := -1, false
	for {
		req, err := build(r.nonces[o])
		if err != nil {
			return nil, err
		}
		x, err := r.do(ctx, req)
		if err != nil {
			return nil, err
		}
		if n := x.header.Get("DPoP-Nonce"); n != "" {
			r.nonces[o] = n // RFC 9449 §8.2: the new nonce is the one to use from now on
		}
		if ev >= 0 {
			r.nonceLog[ev].after, ev = x, -1
		}
		switch {
		case x.status == http.StatusTooManyRequests && !limited:
			limited = true
			continue
		case x.status == http.StatusTooManyRequests:
			return nil, &rateLimitedError{wait: retryafter.Parse(x.header.Get("Retry-After"), time.Now()), endpoint: retryafter.Endpoint(req.URL)}
		}
		scheme, code := errorCode(x)
		if code != "use_dpop_nonce" || !nonceRetry {
			return x, nil
		}
		nonceRetry = false
		r.nonceLog = append(r.nonceLog, nonceEvent{origin: o, endpoint: retryafter.Endpoint(req.URL),
			inChallenge: scheme != "", named: x.header.Get("DPoP-Nonce") != ""})
		if x.header.Get("DPoP-Nonce") == "" {
			return x, nil // nothing to retry with: the nonce check says so
		}
		ev = len(r.nonceLog) - 1
		r.nonceLog[ev].retried = true
	}
}

// errorCode is the error code of an answer: from a DPoP or Bearer
// challenge in WWW-Authenticate (RFC 9449 §7.1, RFC 6750 §3), with the
// scheme it came in, or else from a JSON error body (RFC 6749 §5.2, Poppy
// 0.1 §7.13), with scheme "". A code that is not a plain code is "?".
func errorCode(x *exchange) (scheme, code string) {
	cs := auth.ParseChallenges(x.header)
	for _, s := range []string{"DPoP", "Bearer"} {
		if c, ok := auth.FindChallenge(cs, s); ok && c.Params["error"] != "" {
			return s, plainCode(c.Params["error"])
		}
	}
	var b struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(x.body, &b) == nil && b.Error != "" {
		return "", plainCode(b.Error)
	}
	return "", ""
}

// plainCode is code when it is a plain error code (letters, digits, "_",
// "-" and ".", as every code of Poppy 0.1 and OAuth is), else "?": no other
// Company text is echoed into a report.
func plainCode(code string) string {
	if !untrusted.Code(code) || strings.ContainsFunc(code, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.')
	}) {
		return "?"
	}
	return code
}

// challenge reports whether the answer has a challenge of scheme in
// WWW-Authenticate, and its error code ("" for none).
func challenge(x *exchange, scheme string) (bool, string) {
	c, ok := auth.FindChallenge(auth.ParseChallenges(x.header), scheme)
	if !ok {
		return false, ""
	}
	if e := c.Params["error"]; e != "" {
		return true, plainCode(e)
	}
	return true, ""
}
