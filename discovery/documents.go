package discovery

// This file reads discovery's own documents (poppy.json, RFC 8414 and RFC
// 9728 metadata) through FetchDocument, turning what the Company got wrong
// into findings.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"strings"
)

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
	if ct := f.Header.Get("Content-Type"); !isJSON(ct) {
		if !jsonObject(f.Body) {
			// A storefront that answers every path with its HTML page is the common case.
			fs.errorf(section, "%s answered with Content-Type %q, not JSON (a soft 404 page?)", f.URL, ct)
			return nil, fs, nil
		}
		// A document on a file host is often served as text/plain: what
		// parses as a JSON object is still the Company's document.
		fs.warnf(section, "%s is served with Content-Type %q instead of application/json; it was read because its body is a JSON object", f.URL, ct)
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

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// jsonObject reports whether body is one JSON object.
func jsonObject(body []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) && json.Valid(body)
}
