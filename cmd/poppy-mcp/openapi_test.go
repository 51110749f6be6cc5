package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// wantGolden compares got with testdata/name; -update rewrites it.
func wantGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

// TestOpenAPICommand runs `poppy-mcp openapi` on the reference Company's
// store API, by URL as an API owner would, in both output forms.
func TestOpenAPICommand(t *testing.T) {
	t.Parallel()
	srv := poppytest.NewServer(t, nil)
	env, resolve := companyArgs(t, srv)
	const doc = "https://api.example.com/openapi.json"
	out, errOut, code := runBinary(t, env, append(append([]string{"openapi"}, resolve...), doc)...)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	wantGolden(t, "openapi.golden.txt", out)

	out, errOut, code = runBinary(t, env, append(append([]string{"openapi", "--json"}, resolve...), doc)...)
	if code != 0 || errOut != "" {
		t.Fatalf("--json: exit %d, stderr %s", code, errOut)
	}
	var got struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Tools) != 7 {
		t.Fatalf("--json: %d tools, %v", len(got.Tools), err)
	}
	for _, tool := range got.Tools {
		name, _ := tool["name"].(string)
		if !strings.HasPrefix(name, "example_com_api_") || tool["inputSchema"] == nil || tool["annotations"] == nil {
			t.Errorf("tool %v", tool)
		}
	}
	wantGolden(t, "openapi.golden.json", out)
}

func TestOpenAPICommandErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	html := write("soft404.html", "<html><body>Not found</body></html>")
	// A document that is not OpenAPI is said to be not one, before the
	// reason. Before, a text file got "cannot read the document: not an
	// object" (and earlier "json: cannot unmarshal string into Go value of
	// type map[string]json.RawMessage").
	notOpenAPI := func(path string) string {
		return path + ` is not an OpenAPI document poppy-mcp reads (a JSON or YAML object with "openapi"`
	}
	text, other := write("notes.txt", "hello world\n"), write("package.json", `{"name": "x"}`)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"openapi"}, 2, "usage"},
		{[]string{"openapi", filepath.Join(dir, "missing.json")}, 2, "no such file"},
		{[]string{"openapi", "http://example.com/openapi.json"}, 2, "https"},
		{[]string{"openapi", html}, 1, notOpenAPI(html)},
		{[]string{"openapi", text}, 1, notOpenAPI(text)},
		{[]string{"openapi", other}, 1, notOpenAPI(other)},
		{[]string{"openapi", other}, 1, `"swagger": "2.0"): neither "openapi" nor "swagger" is set`},
	} {
		_, errOut, code := runBinary(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// `poppy-mcp openapi` reads documents up to openapi2tools.MaxDocumentBytes
// (64 MiB; Microsoft Graph's beta description is 45 MiB), and says so past
// it. Before, it refused anything over 32 MiB.
func TestOpenAPICommandLargeDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, size int) string {
		const doc = `{"openapi":"3.0.0","info":{"title":"Big","version":"1","description":"%s"},"paths":{"/a":{"get":{"operationId":"a"}}}}`
		path := filepath.Join(dir, name)
		body := fmt.Sprintf(doc, strings.Repeat("x", size-len(doc)+2))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	out, errOut, code := runBinary(t, nil, "openapi", write("big.json", 45<<20))
	if code != 0 || !strings.Contains(out, "Big 1: 1 tools") {
		t.Fatalf("45 MiB: exit %d, stdout %.200q, stderr %q", code, out, errOut)
	}
	_, errOut, code = runBinary(t, nil, "openapi", write("huge.json", 64<<20+1))
	if code != 2 || !strings.Contains(errOut, "larger than 64 MiB") {
		t.Fatalf("64 MiB + 1: exit %d, stderr %q", code, errOut)
	}
}

// What `poppy-mcp openapi --json` prints, as tools/list gives it, carries
// patterns in the ECMA-262 form clients compile: the Java-style pattern of the
// document is translated, and one whose meaning is not certain is dropped
// with a note in the description. Before, `[\w-.+]` went out as it was and
// the TypeScript SDK refused the tool.
func TestOpenAPICommandPatterns(t *testing.T) {
	t.Parallel()
	out, errOut, code := runBinary(t, nil, "openapi", "--json", "../../openapi2tools/testdata/nasty/bodies.json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		`"pattern": "^[\\w\\-.+]+@[\\w\\-.+]+$"`,
		`"pattern": "^arn:aws:iam::\\d{12}:role/\\S+$"`,
		`"description": "Letters only. (pattern in another regex dialect, not checked: [a-zA-Z]{1-70})"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %s", want)
		}
	}
	if strings.Contains(out, `[\\w-.+]`) || strings.Contains(out, `\\:`) {
		t.Error("a pattern Unicode mode refuses reached the output")
	}
}

// A YAML document whose aliases expand 1,500-fold (517 KB, 757 MB of JSON
// once expanded) is refused with exit 1 and an error that names the alias
// expansion. Before, the process grew past 2 GB converting it to JSON, and
// died with "fatal error: out of memory" where memory was short.
func TestOpenAPICommandYAMLAliasBomb(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bomb.yaml")
	if err := os.WriteFile(path, poppytest.YAMLAliasBomb("https://api.example.com"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, nil, "openapi", path)
	if code != 1 || !strings.Contains(errOut, "YAML alias expansion: the aliases of this 507 KiB document expand it past 3.0 MiB of text (at alias *big on line") {
		t.Fatalf("exit %d, stdout %.200q, stderr %q", code, out, errOut)
	}
	if strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, "panic") {
		t.Errorf("stderr has a stack trace: %s", errOut)
	}
}
