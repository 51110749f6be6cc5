package tools_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// revisions are the MCP revisions every client test runs under.
var revisions = []string{"2025-11-25", "2026-07-28"}

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var structured map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &structured); err != nil || structured == nil {
		t.Fatalf("%s: structured content %s: %v", name, raw, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s: no text content for text-only clients", name)
	}
	return res, structured
}

func TestDiscoverCompany(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newHarness(t, nil)
			cs := h.connect(t, rev)
			res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
			if res.IsError || got["usable"] != true {
				t.Fatalf("isError=%v structured=%v", res.IsError, got)
			}
			if got["company_agent"] != true || got["website_join"] != true {
				t.Errorf("company_agent/website_join = %v/%v", got["company_agent"], got["website_join"])
			}
			signIn, _ := got["sign_in"].([]any)
			if len(signIn) != 3 {
				t.Fatalf("sign_in = %v", got["sign_in"])
			}
			med := signIn[2].(map[string]any)
			fields := med["fields"].([]any)
			if med["type"] != "mediated" || fields[1].(map[string]any)["secret"] != true {
				t.Errorf("mediated = %v", med)
			}
			if apis := got["apis"].([]any); len(apis) != 2 {
				t.Errorf("apis = %v", apis)
			}
		})
	}
}

// TestDiscoverCompanyRefused: a Company that breaks a rule is refused, and
// the model reads why with the section.
func TestDiscoverCompanyRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &poppytest.Options{Metadata: func(m map[string]any) { m["issuer"] = "https://auth.evil.example" }})
	cs := h.connect(t, revisions[0])
	res, got := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	if !res.IsError || got["usable"] != false {
		t.Fatalf("isError=%v usable=%v", res.IsError, got["usable"])
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, "§3.2") || !strings.Contains(text, "cannot be used") {
		t.Errorf("text = %q", text)
	}
}

func TestDiscoverCompanyBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	for _, d := range []string{"http://example.com", "example.com/orders", "unknown.invalid"} {
		res, _ := call(t, cs, "discover_company", map[string]any{"domain": d})
		if !res.IsError {
			t.Errorf("%q: not an error result", d)
		}
	}
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestToolInvariants checks rules across every built-in tool, as the
// github-mcp-server tests do: names valid and unique, every annotation set,
// a description within budget, an input schema that is a plain object.
// Each definition is pinned in testdata/toolsnaps (TestToolSnapshots); the
// tools a Company brings are held to the same rules in TestToolsListBudget.
func TestToolInvariants(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, tool := range builtinTools(t) {
		if !toolName.MatchString(tool.Name) || seen[tool.Name] {
			t.Errorf("tool name %q is invalid or repeated", tool.Name)
		}
		seen[tool.Name] = true
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil || a.Title == "" {
			t.Errorf("%s: annotations not all set: %+v", tool.Name, a)
		}
		if n := len(tool.Description); n == 0 || n > 400 {
			t.Errorf("%s: description of %d bytes (budget 400)", tool.Name, n)
		}
		var schema map[string]any
		raw, _ := json.Marshal(tool.InputSchema)
		_ = json.Unmarshal(raw, &schema)
		if schema["type"] != "object" {
			t.Errorf("%s: input schema type %v", tool.Name, schema["type"])
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := schema[k]; ok {
				t.Errorf("%s: top-level %s in input schema", tool.Name, k)
			}
		}
	}
}
