package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/localfile"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// maxOpenAPIInput bounds the document read: what openapi2tools translates.
const maxOpenAPIInput = openapi2tools.MaxDocumentBytes

// perOperationLimit is tools.Options.MaxAPITools' default, for the note.
const perOperationLimit = 30

// openAPIConfig is openapi's parsed command line.
type openAPIConfig struct {
	common // only --resolve is registered
	asJSON bool
	domain string
}

// openAPIFlags registers openapi's flags on fs, bound to a new config.
func openAPIFlags(fs *flag.FlagSet) *openAPIConfig {
	cfg := &openAPIConfig{}
	fs.Var(&cfg.resolve, "resolve", "reach a name at a local address: `HOST:PORT:ADDR`, like curl's --resolve (repeatable; HOST may be *.example.com)")
	fs.BoolVar(&cfg.asJSON, "json", false, `print one JSON object {"tools": [...]} of MCP tools, exactly as tools/list gives them`)
	fs.StringVar(&cfg.domain, "domain", "", "the Company's `DOMAIN`, for the tool-name prefix (default: a URL's host without api. or www.; none for a file)")
	return cfg
}

// runOpenAPI prints the tools an OpenAPI document becomes, for API owners
// (docs/tools.md): with --json, one object {"tools": [...]} of MCP Tool objects
// exactly as tools/list gives them. Exit 0: translated; 1: the document
// cannot be translated; 2: usage, or it could not be read.
func runOpenAPI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("openapi", flag.ContinueOnError)
	cfg := openAPIFlags(fs)
	pos, ok := parseInterspersed(fs, args, stderr)
	if !ok {
		return 2 // said on one line, with the nearest flag
	}
	if len(pos) != 1 {
		return usageError(stderr, "openapi")
	}
	data, docURL, err := readOpenAPI(ctx, pos[0], stdin, &cfg.common)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp openapi: %v\n", err)
		return 2
	}
	if cfg.domain == "" && docURL != "" {
		cfg.domain = defaultDomain(docURL)
	}
	cat, defs, err := tools.LoadAPITools(ctx, data, docURL, cfg.domain)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp openapi: %s\n", notTranslated(pos[0], err))
		return 1
	}
	if cfg.asJSON {
		printSkipped(stderr, cat)
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Tools []mcp.Tool `json:"tools"`
		}{defs}); err != nil {
			fmt.Fprintf(stderr, "poppy-mcp openapi: %v\n", err)
			return 1
		}
		return 0
	}
	printTools(stdout, cat, cfg.domain)
	printSkipped(stdout, cat)
	return 0
}

// notTranslated says why the document from src could not be translated:
// one openapi2tools cannot read is said not to be an OpenAPI document it
// reads, with what one is, before the reason.
func notTranslated(src string, err error) string {
	if !errors.Is(err, openapi2tools.ErrInvalidDocument) {
		return err.Error()
	}
	if src == "-" {
		src = "the document on stdin"
	}
	return fmt.Sprintf(`%s is not an OpenAPI document poppy-mcp reads (a JSON or YAML object with "openapi": "3.0.x" or "3.1.x", `+
		`or "swagger": "2.0"): %s`, src, strings.TrimPrefix(err.Error(), "openapi2tools: "))
}

// readOpenAPI reads a document from a file ("-" for stdin) or an https URL
// (http only on loopback), and returns it with the URL it came from.
func readOpenAPI(ctx context.Context, src string, stdin io.Reader, c *common) ([]byte, string, error) {
	if !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "http://") {
		r := stdin
		if src != "-" {
			f, err := localfile.OpenNonblocking(src) // a FIFO's open waits for no writer; readDocument bounds the size
			if err != nil {
				return nil, "", err
			}
			defer f.Close()
			r = f
		}
		data, err := readDocument(r)
		return data, "", err
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" || u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, "", fmt.Errorf("%q: want an https URL (http only on loopback) or a file", src)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.1")
	// The URL is the API owner's own, given on the command line: its host is
	// reached wherever it is, as if mapped with --resolve; redirects and
	// other hosts stay behind the network guard.
	g := c.guardOptions()
	given := canonicalHostPort(u)
	g.Resolve = func(hostport string) (string, bool) {
		if to, ok := c.resolve.lookup(hostport); ok {
			return to, true
		}
		return hostport, hostport == given
	}
	resp, err := (&http.Client{Transport: netguard.New(g).Transport()}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s answered HTTP %d", src, resp.StatusCode)
	}
	data, err := readDocument(resp.Body)
	return data, resp.Request.URL.String(), err // relative servers resolve against where it finally was
}

// readDocument reads an OpenAPI document of at most maxOpenAPIInput bytes.
func readDocument(r io.Reader) ([]byte, error) {
	data, err := httpbody.ReadAtMost(r, maxOpenAPIInput)
	if errors.Is(err, httpbody.ErrTooLarge) {
		err = fmt.Errorf("the document is larger than %d MiB", maxOpenAPIInput>>20)
	}
	return data, err
}

// canonicalHostPort is u's lower-case "host:port", with the scheme's port.
func canonicalHostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// defaultDomain is a document URL's host without a leading api. or www.,
// where a Company usually serves its APIs.
func defaultDomain(docURL string) string {
	u, err := url.Parse(docURL)
	if err != nil {
		return ""
	}
	h := strings.ToLower(u.Host)
	for _, p := range []string{"api.", "www."} {
		h = strings.TrimPrefix(h, p)
	}
	return h
}

// printTools lists the tools, one operation a line with its arguments
// (* marks required ones).
func printTools(w io.Writer, cat *openapi2tools.Catalog, domain string) {
	title := strings.TrimSpace(cat.Title + " " + cat.Version)
	if title == "" {
		title = "The document"
	}
	prefix := "no prefix"
	if domain != "" {
		prefix = fmt.Sprintf("prefix %s, as for a Company at %s", tools.APIToolPrefix(domain), domain)
	}
	fmt.Fprintf(w, "%s: %d tools (%s)\n", title, len(cat.Tools), prefix)
	for _, t := range cat.Tools {
		fmt.Fprintf(w, "\n%s\n  %s %s", t.Name, t.Method, t.Path)
		if t.Summary != "" {
			fmt.Fprintf(w, ": %s", t.Summary)
		}
		fmt.Fprintf(w, "\n  arguments: %s\n", argumentList(t.InputSchema))
	}
	if len(cat.Tools) > perOperationLimit {
		fmt.Fprintf(w, "\nWith more than %d operations, poppy-mcp offers them through list_api_operations, "+
			"describe_api_operation and call_api only, not as tools of their own.\n", perOperationLimit)
	}
}

// argumentList names a tool's arguments in order.
func argumentList(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "none"
	}
	var names []string
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, n := range names {
		if slices.Contains(s.Required, n) {
			names[i] += "*"
		}
	}
	return strings.Join(names, ", ")
}

func printSkipped(w io.Writer, cat *openapi2tools.Catalog) {
	if len(cat.Skipped) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSkipped %d operations:\n", len(cat.Skipped))
	for _, s := range cat.Skipped {
		fmt.Fprintf(w, "  %s: %s\n", s.Operation, s.Reason)
	}
}
