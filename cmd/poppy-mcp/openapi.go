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
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/openapi2tools"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// maxOpenAPIInput bounds the document read: what openapi2tools translates.
const maxOpenAPIInput = openapi2tools.MaxDocumentBytes

// perOperationLimit is tools.Options.MaxAPITools' default, for the note.
const perOperationLimit = 30

const openAPIUsage = "usage: poppy-mcp openapi [--json] [--domain DOMAIN] [--resolve HOST:PORT:ADDR]... FILE_OR_URL"

// runOpenAPI prints the tools an OpenAPI document becomes, for API owners
// (docs/tools.md): with --json, one object {"tools": [...]} of MCP Tool objects
// exactly as tools/list gives them. Exit 0: translated; 1: the document
// cannot be translated; 2: usage, or it could not be read.
func runOpenAPI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("openapi", flag.ContinueOnError)
	var c common
	fs.Var(&c.resolve, "resolve", "HOST:PORT:ADDR, map a name to a local address like curl's (repeatable)")
	asJSON := fs.Bool("json", false, `print one JSON object {"tools": [...]} of MCP tools`)
	domain := fs.String("domain", "", "the Company's domain, for the tool-name prefix (default: a URL's host without api. or www.; none for a file)")
	pos, ok := parseInterspersed(fs, args, stderr)
	if !ok || len(pos) != 1 {
		fmt.Fprintln(stderr, openAPIUsage)
		return 2
	}
	data, docURL, err := readOpenAPI(ctx, pos[0], stdin, &c)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp openapi: %v\n", err)
		return 2
	}
	if *domain == "" && docURL != "" {
		*domain = defaultDomain(docURL)
	}
	cat, defs, err := tools.LoadAPITools(ctx, data, docURL, *domain)
	if err != nil {
		fmt.Fprintf(stderr, "poppy-mcp openapi: %v\n", err)
		return 1
	}
	if *asJSON {
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
	printTools(stdout, cat, *domain)
	printSkipped(stdout, cat)
	return 0
}

// readOpenAPI reads a document from a file ("-" for stdin) or an https URL
// (http only on loopback), and returns it with the URL it came from.
func readOpenAPI(ctx context.Context, src string, stdin io.Reader, c *common) ([]byte, string, error) {
	if !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "http://") {
		r := stdin
		if src != "-" {
			f, err := os.Open(src)
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
