package discovery

// This file is the one fetcher of public documents: discovery's own
// (poppy.json, RFC 8414 and RFC 9728 metadata) and the OpenAPI documents
// poppy.json names. Every document gets the same redirect policy, the same
// Retry-After holds as every other request to the Company, a size cap of the
// caller's choosing, and a deadline of its own: documents are not long-polls.
// Discovery reads its own documents through it with fetchJSON, turning what
// the Company got wrong into findings.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/retryafter"
)

// maxRedirects is the most redirects a document fetch follows.
const maxRedirects = 5

// Reasons a document fetch fails, in FetchError.Err (test with errors.Is).
var (
	// ErrNotHTTPS: the document's URL is not an https URL.
	ErrNotHTTPS = errors.New("not an https URL")
	// ErrInsecureRedirect: a redirect to a URL that is not HTTPS.
	ErrInsecureRedirect = errors.New("redirected to a URL that is not HTTPS")
	// ErrTooManyRedirects: more than five redirects.
	ErrTooManyRedirects = errors.New("redirected more than 5 times")
	// ErrStatus: an HTTP status other than 200 (or 304 to a conditional request).
	ErrStatus = errors.New("answered with an HTTP error")
	// ErrTooLarge: a body over the cap.
	ErrTooLarge = errors.New("the document is too large")
	// ErrRateLimited: the endpoint is held by a 429's Retry-After; nothing was sent.
	ErrRateLimited = errors.New("rate limited")
	// ErrTooSlow: the document did not arrive within the fetch's deadline.
	ErrTooSlow = errors.New("the document did not arrive in time")
)

// FetchError is a document that could not be fetched.
type FetchError struct {
	URL string
	// Status is the HTTP status answered, when there was one.
	Status int
	// RetryAfter is how long to wait before asking again (ErrRateLimited).
	RetryAfter time.Duration
	// Err is the reason: one of the Err values above, or a network error.
	Err error
}

func (e *FetchError) Error() string { return fmt.Sprintf("discovery: fetching %s: %v", e.URL, e.Err) }
func (e *FetchError) Unwrap() error { return e.Err }

// companyFault reports whether the Company's documents are at fault (a
// rule broken), rather than the network or a passing server condition.
func (e *FetchError) companyFault() bool {
	return errors.Is(e.Err, ErrNotHTTPS) || errors.Is(e.Err, ErrInsecureRedirect) || errors.Is(e.Err, ErrTooManyRedirects) ||
		errors.Is(e.Err, ErrTooLarge) || errors.Is(e.Err, ErrStatus) && e.Status < 500 && e.Status != http.StatusTooManyRequests
}

// DocumentRequest is one public document to fetch.
type DocumentRequest struct {
	// URL is the document's https URL. Required.
	URL string
	// Accept is the Accept header. Zero: "application/json".
	Accept string
	// MaxBytes caps the body. Zero: Options.MaxBodyBytes.
	MaxBytes int64
	// Refresh revalidates a cached copy with the Company.
	Refresh bool
	// IfNoneMatch makes the request conditional on this entity tag (RFC
	// 9110 §13.1.2); a 304 then comes back with NotModified set. Zero: none.
	IfNoneMatch string
	// KnownETag is the entity tag of a copy the caller already holds: a 200
	// with this ETag comes back with NotModified set and its body unread.
	// Unlike IfNoneMatch, the request stays one the HTTP cache may answer.
	// Zero: none.
	KnownETag string
}

// Fetched is a fetched document.
type Fetched struct {
	// URL is where the document was finally found, after redirects.
	URL string
	// NotModified reports a 304 to IfNoneMatch, or a 200 with KnownETag:
	// Body is empty.
	NotModified bool
	Header      http.Header
	Body        []byte
}

// FetchDocument GETs a public document. Redirects are followed only to
// HTTPS, at most five; an endpoint a 429 has held is not asked again before
// its Retry-After (a hold that ends within the fetch's deadline is waited
// for, once); the body is capped; and the whole fetch, body included, ends
// at Options.Timeout. Errors are *FetchError.
func (c *Client) FetchDocument(ctx context.Context, r DocumentRequest) (*Fetched, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.get(ctx, r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		drain(resp.Body)
		// Poppy 0.1 §4.3: "MUST wait at least that long before sending the
		// request again": get waits for the hold, or fails without sending.
		resp, err = c.get(ctx, r)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			drain(resp.Body)
			err = c.heldErr(r.URL, resp.Request.URL.String())
		}
	}
	if err != nil {
		return nil, c.fetchErr(parent, r.URL, err)
	}
	defer resp.Body.Close()
	f := &Fetched{URL: resp.Request.URL.String(), Header: resp.Header}
	switch {
	case resp.StatusCode == http.StatusNotModified && r.IfNoneMatch != "":
		f.NotModified = true
		return f, nil
	case resp.StatusCode != http.StatusOK:
		return nil, &FetchError{URL: f.URL, Status: resp.StatusCode, Err: fmt.Errorf("%w %d", ErrStatus, resp.StatusCode)}
	case r.KnownETag != "" && resp.Header.Get("ETag") == r.KnownETag:
		f.NotModified = true
		return f, nil
	}
	max := r.MaxBytes
	if max <= 0 {
		max = c.maxBody
	}
	if f.Body, err = io.ReadAll(io.LimitReader(resp.Body, max+1)); err != nil {
		return nil, c.fetchErr(parent, f.URL, err)
	}
	if int64(len(f.Body)) > max {
		return nil, &FetchError{URL: f.URL, Err: fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, max)}
	}
	return f, nil
}

// get sends one GET of the document, after any hold on its endpoint.
func (c *Client) get(ctx context.Context, r DocumentRequest) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme != "https" {
		// Poppy 0.1 §3: every Poppy URL is HTTPS; a document decides where tokens go.
		return nil, ErrNotHTTPS
	}
	req.Header.Set("Accept", "application/json")
	if r.Accept != "" {
		req.Header.Set("Accept", r.Accept)
	}
	if r.Refresh {
		req.Header.Set("Cache-Control", "no-cache") // RFC 9111 §5.2.1.4: revalidate with the origin
	}
	if r.IfNoneMatch != "" {
		req.Header.Set("If-None-Match", r.IfNoneMatch)
	}
	if err := c.waitHold(ctx, req); err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err == nil {
		c.holds.Observe(resp, c.now())
	}
	return resp, err
}

// checkRedirect follows redirects only to HTTPS URLs (Poppy 0.1 §3: "Personal
// Agents MUST follow redirects, and every redirect MUST be to an HTTPS URL"),
// at most five, and never to an endpoint a 429 holds.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "https" {
		return ErrInsecureRedirect
	}
	if len(via) > maxRedirects {
		return ErrTooManyRedirects
	}
	return c.waitHold(req.Context(), req)
}

// waitHold waits out a hold on req's endpoint when it ends before ctx's
// deadline, and otherwise fails at once, sending nothing.
func (c *Client) waitHold(ctx context.Context, req *http.Request) error {
	d := c.holds.Remaining(retryafter.Endpoint(req.URL), c.now())
	if d <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && c.now().Add(d).After(dl) {
		return c.heldErr(req.URL.String(), req.URL.String())
	}
	return retryafter.Sleep(ctx, d)
}

// heldErr is the error of a document whose endpoint (at held) a 429 holds.
func (c *Client) heldErr(docURL, held string) error {
	d := retryafter.Default
	if u, err := url.Parse(held); err == nil {
		d = max(c.holds.Remaining(retryafter.Endpoint(u), c.now()), d)
	}
	secs := int64(math.Ceil(d.Seconds()))
	return &FetchError{URL: docURL, Status: http.StatusTooManyRequests, RetryAfter: d,
		Err: fmt.Errorf("%w: retry after %d s", ErrRateLimited, secs)}
}

// fetchErr turns what http.Client returned into a *FetchError. A deadline
// that is the fetch's own, not the caller's, is ErrTooSlow.
func (c *Client) fetchErr(parent context.Context, rawURL string, err error) error {
	var (
		fe   *FetchError
		uerr *url.Error
	)
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, ErrInsecureRedirect) || errors.Is(err, ErrTooManyRedirects):
		reason := ErrTooManyRedirects
		if errors.Is(err, ErrInsecureRedirect) {
			reason = ErrInsecureRedirect
		}
		if errors.As(err, &uerr) {
			return &FetchError{URL: rawURL, Err: fmt.Errorf("%w (%s)", reason, uerr.URL)}
		}
		return &FetchError{URL: rawURL, Err: reason}
	case errors.Is(err, ErrNotHTTPS):
		return &FetchError{URL: rawURL, Err: ErrNotHTTPS}
	case parent.Err() != nil:
		return &FetchError{URL: rawURL, Err: parent.Err()}
	case errors.Is(err, context.DeadlineExceeded):
		return &FetchError{URL: rawURL, Err: fmt.Errorf("%w: %v", ErrTooSlow, c.timeout)}
	}
	return &FetchError{URL: rawURL, Err: err}
}

// drain reads a little of a body that is not used, so its connection can be
// reused, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// document is one fetched discovery document.
type document struct {
	url  string // the URL finally answered, after redirects
	body []byte
}

// fetchJSON fetches a discovery document. It returns findings for what the
// Company got wrong (a URL or redirect that is not HTTPS, too many
// redirects, an HTTP 4xx, a page that is not JSON, an oversized body) and a
// *FetchError when nothing could be checked (DNS, TLS, an address that is
// not public, timeouts, 5xx, a 429's hold).
func (c *Client) fetchJSON(ctx context.Context, rawURL, section string, refresh bool) (*document, []Finding, error) {
	f, err := c.FetchDocument(ctx, DocumentRequest{URL: rawURL, Refresh: refresh})
	var fe *FetchError
	if errors.As(err, &fe) && fe.companyFault() {
		return nil, fetchFindings(fe, rawURL, section), nil
	}
	if err != nil {
		return nil, nil, err
	}
	var fs findings
	if ct := f.Header.Get("Content-Type"); !httpbody.IsJSON(ct) {
		if !jsonObject(f.Body) {
			// A storefront that answers every path with its HTML page is the common case.
			fs.errorf(section, "%s answered with Content-Type %s, not JSON (a soft 404 page?)", f.URL, quote(ct))
			return nil, fs, nil
		}
		// A document on a file host is often served as text/plain: what
		// parses as a JSON object is still the Company's document.
		fs.warnf(section, "%s is served with Content-Type %s instead of application/json; it was read because its body is a JSON object", f.URL, quote(ct))
	}
	return &document{url: f.URL, body: f.Body}, fs, nil
}

// fetchFindings turns a fetch the Company is at fault for into a finding.
func fetchFindings(fe *FetchError, rawURL, section string) []Finding {
	var fs findings
	switch {
	case errors.Is(fe.Err, ErrNotHTTPS):
		fs.errorf(section, "%s is not an HTTPS URL", rawURL)
	case errors.Is(fe.Err, ErrInsecureRedirect):
		// Poppy 0.1 §3: "every redirect MUST be to an HTTPS URL".
		fs.errorf(section, "%s redirects to a URL that is not HTTPS", rawURL)
	case errors.Is(fe.Err, ErrTooManyRedirects):
		fs.errorf(section, "%s redirects more than %d times", rawURL, maxRedirects)
	case errors.Is(fe.Err, ErrStatus):
		fs.errorf(section, "%s answered HTTP %d", fe.URL, fe.Status)
	default:
		fs.errorf(section, "%s: %v", fe.URL, fe.Err)
	}
	return fs
}

// jsonObject reports whether body is one JSON object.
func jsonObject(body []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) && json.Valid(body)
}
