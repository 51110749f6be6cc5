package openapi2tools

// This file sends a request and turns the response into a Result a model can
// read: JSON compacted, text cut at a limit with a note saying how to narrow
// the call, binary bodies summarised by type and size and never dumped. The
// body is read with a hard limit.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	defaultMaxBody   = 16 << 10
	defaultReadLimit = 4 << 20
)

// Result is an HTTP response as a model reads it. Any status is a Result;
// only a failure to get a response is an error.
type Result struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        string `json:"body"`
	Truncated   bool   `json:"truncated,omitempty"`
	Note        string `json:"note,omitempty"`
}

// ResultOptions tune Do. A nil *ResultOptions means all defaults.
type ResultOptions struct {
	// MaxBody is how many bytes of body the Result shows. Zero means 16 KiB.
	MaxBody int
	// ReadLimit is the most read from the network. Zero means 4 MiB.
	ReadLimit int64
	// NarrowBy names the arguments that make a response smaller (page sizes,
	// filters), for the note on a cut body. Zero means a generic note.
	NarrowBy []string
	// Hosts a redirect may lead to (host or host:port). Zero means only the
	// request's own host.
	Hosts []string
}

func (o *ResultOptions) withDefaults() ResultOptions {
	var v ResultOptions
	if o != nil {
		v = *o
	}
	if v.MaxBody <= 0 {
		v.MaxBody = defaultMaxBody
	}
	if v.ReadLimit <= 0 {
		v.ReadLimit = defaultReadLimit
	}
	return v
}

// Call builds the request for the named tool and sends it through client
// (the Session's DPoP client), with the catalog's hosts as the only redirect
// targets and the tool's narrowing arguments named in a cut body's note.
func (c *Catalog) Call(ctx context.Context, client *http.Client, name string, args map[string]any, opts *ResultOptions) (*Result, error) {
	req, err := c.NewRequest(ctx, name, args)
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	if o.Hosts == nil {
		o.Hosts = c.Hosts
	}
	if o.NarrowBy == nil {
		t, _ := c.Tool(name)
		o.NarrowBy = t.narrowingArgs()
	}
	return Do(ctx, client, req, &o)
}

// narrowing are query parameter names that page or filter a response.
var narrowing = map[string]bool{
	"per_page": true, "perpage": true, "page_size": true, "pagesize": true, "limit": true,
	"max_results": true, "maxresults": true, "count": true, "size": true, "top": true,
	"$top": true, "first": true, "last": true, "fields": true, "select": true, "$select": true,
	"q": true, "query": true, "filter": true, "$filter": true, "search": true, "since": true,
	"until": true, "page": true, "cursor": true, "offset": true, "after": true, "before": true,
}

func (t *Tool) narrowingArgs() []string {
	var out []string
	for _, a := range t.args {
		if a.In == inQuery && narrowing[strings.ToLower(a.Key)] {
			out = append(out, a.Name)
		}
	}
	return out
}

// errForeignRedirect stops a redirect to a host outside the allowed set.
var errForeignRedirect = newError("foreign_host", "refusing a redirect to a host the document's servers do not name")

// Do sends req through client (the Session's DPoP client; nil is an error)
// and reads the response into a Result. A redirect to a host outside
// opts.Hosts (or, by default, req's own host) is refused. The response body
// is always closed.
func Do(ctx context.Context, client *http.Client, req *http.Request, opts *ResultOptions) (*Result, error) {
	o := opts.withDefaults()
	if client == nil {
		// Poppy 0.1 §4.3: "Personal Agents MUST send a Session Token on every
		// API and conversation request": only the Session's client does.
		return nil, newError("invalid_arguments", "no client: calls go through the Session's client")
	}
	hosts := o.Hosts
	if len(hosts) == 0 {
		hosts = []string{canonicalHost(req.URL)}
	}
	guarded := *client
	guarded.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if !slices.Contains(hosts, canonicalHost(next.URL)) || next.URL.Scheme != "https" {
			return errForeignRedirect
		}
		if client.CheckRedirect != nil {
			return client.CheckRedirect(next, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	resp, err := guarded.Do(req.WithContext(ctx))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && errors.Is(ue.Err, errForeignRedirect) {
			return nil, errForeignRedirect
		}
		return nil, fmt.Errorf("openapi2tools: %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, o.ReadLimit+1))
	if err != nil {
		return nil, fmt.Errorf("openapi2tools: reading %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	return readResult(resp, data, &o), nil
}

// readResult shapes a response body already read (at most ReadLimit+1 bytes).
func readResult(resp *http.Response, data []byte, o *ResultOptions) *Result {
	r := &Result{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	overRead := int64(len(data)) > o.ReadLimit
	if overRead {
		data = data[:o.ReadLimit]
		// Do not let a character split by the limit make text look binary.
		for i := 0; i < utf8.UTFMax-1 && len(data) > 0; i++ {
			if r, size := utf8.DecodeLastRune(data); r != utf8.RuneError || size != 1 {
				break
			}
			data = data[:len(data)-1]
		}
	}
	size := sizeText(int64(len(data)), overRead)
	switch bodyKind(r.ContentType, data) {
	case "binary":
		r.Note = fmt.Sprintf("binary body (%s, %s) not shown", orUnknown(mediaOf(r.ContentType, data)), size)
		return r
	case "json":
		var buf bytes.Buffer
		if !overRead && json.Compact(&buf, data) == nil {
			data = buf.Bytes()
		}
	}
	if len(data) <= o.MaxBody && !overRead {
		r.Body = string(data)
		return r
	}
	cut := min(o.MaxBody, len(data))
	for cut > 0 && cut < len(data) && !utf8.RuneStart(data[cut]) {
		cut--
	}
	r.Body, r.Truncated = string(data[:cut]), true
	r.Note = fmt.Sprintf("body cut at %d of %s; %s", cut, size, narrowHint(o.NarrowBy))
	return r
}

func narrowHint(args []string) string {
	if len(args) == 0 {
		return "narrow the call with more specific arguments"
	}
	return "narrow the call with " + strings.Join(args, ", ")
}

func sizeText(n int64, more bool) string {
	if more {
		return fmt.Sprintf("more than %d bytes", n)
	}
	return fmt.Sprintf("%d bytes", n)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

func mediaOf(contentType string, data []byte) string {
	if contentType == "" {
		contentType = http.DetectContentType(data)
	}
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return t
}

// bodyKind is "json", "text" or "binary": by media type, then by content.
func bodyKind(contentType string, data []byte) string {
	t := mediaOf(contentType, data)
	textual := strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "+xml") ||
		slices.Contains([]string{"application/xml", "application/javascript", "application/x-www-form-urlencoded",
			"application/yaml", "application/x-yaml", "application/problem+xml", "application/graphql"}, t)
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "binary"
	}
	switch {
	case t == "application/json" || strings.HasSuffix(t, "+json"):
		return "json"
	case textual || len(data) == 0:
		return "text"
	}
	return "binary"
}
