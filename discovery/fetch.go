package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// errInsecureRedirect and errTooManyRedirects end a redirect chain; fetch turns
// them into findings.
var (
	errInsecureRedirect = errors.New("redirect to a URL that is not HTTPS")
	errTooManyRedirects = errors.New("too many redirects")
)

// document is one fetched public document.
type document struct {
	url  string // the URL finally answered, after redirects
	body []byte
}

// fetch GETs a public JSON document. It returns findings for what the Company
// got wrong (redirects to http, soft 404 pages, oversized bodies, HTTP errors)
// and a *FetchError when nothing could be checked (DNS, TLS, timeouts, 5xx).
func (c *Client) fetch(ctx context.Context, rawURL, section string, refresh bool) (*document, []Finding, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, &FetchError{URL: rawURL, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if refresh {
		req.Header.Set("Cache-Control", "no-cache") // RFC 9111 §5.2.1.4: revalidate with the origin
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, redirectFindings(err, rawURL, section), fetchErr(err, rawURL)
	}
	defer resp.Body.Close()
	var fs findings
	final := resp.Request.URL.String()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, nil, &FetchError{URL: final, Err: fmt.Errorf("HTTP %d", resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		fs.errorf(section, "%s answered HTTP %d", final, resp.StatusCode)
		return nil, fs, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, nil, &FetchError{URL: final, Err: err}
	}
	if int64(len(body)) > c.maxBody {
		fs.errorf(section, "%s is larger than %d bytes", final, c.maxBody)
		return nil, fs, nil
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		// A storefront that answers every path with its HTML page is the common case.
		fs.errorf(section, "%s answered with Content-Type %q, not JSON (a soft 404 page?)", final, resp.Header.Get("Content-Type"))
		return nil, fs, nil
	}
	return &document{url: final, body: body}, nil, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// redirectFindings turns a redirect refused by checkRedirect into a finding.
func redirectFindings(err error, rawURL, section string) []Finding {
	var fs findings
	switch {
	case errors.Is(err, errInsecureRedirect):
		// Poppy 0.1 §3: "every redirect MUST be to an HTTPS URL".
		fs.errorf(section, "%s redirects to a URL that is not HTTPS", rawURL)
	case errors.Is(err, errTooManyRedirects):
		fs.errorf(section, "%s redirects more than %d times", rawURL, maxRedirects)
	}
	return fs
}

func fetchErr(err error, rawURL string) error {
	if errors.Is(err, errInsecureRedirect) || errors.Is(err, errTooManyRedirects) {
		return nil
	}
	return &FetchError{URL: rawURL, Err: err}
}

const maxRedirects = 5

// checkRedirect follows redirects only to HTTPS URLs (Poppy 0.1 §3: "Personal
// Agents MUST follow redirects, and every redirect MUST be to an HTTPS URL").
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme != "https" {
		return errInsecureRedirect
	}
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	return nil
}
