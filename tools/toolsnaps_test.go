package tools_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/browser"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// snapshotDir holds one file per built-in tool: its definition as an MCP
// client lists it.
const snapshotDir = "testdata/toolsnaps"

// builtinTools are the tools poppy-mcp serves itself, browse_page included
// (its browser starts only when a page is opened), as the official go-sdk
// client lists them.
func builtinTools(t *testing.T) []*sdk.Tool {
	t.Helper()
	b, err := browser.New("/nonexistent/chromium", nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := tools.New(discovery.New(nil, nil), &tools.Options{Browser: b})
	t.Cleanup(ts.Close)
	hs := httptest.NewServer(ts.HTTPHandler())
	t.Cleanup(hs.Close) // after the client session closes (cleanups run last-in first-out)
	h := &harness{url: hs.URL + "/mcp"}
	list, err := h.connect(t, revisions[0]).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return list.Tools
}

// TestToolSnapshots pins each built-in tool's definition in a file of its
// own (testdata/toolsnaps/NAME.json), so that a review shows which tool
// changed; go test -update rewrites them. A snapshot whose tool is gone
// fails until it is removed (-update removes it).
func TestToolSnapshots(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, tool := range builtinTools(t) {
		listed[tool.Name+".json"] = true
		golden.CheckJSON(t, filepath.Join(snapshotDir, tool.Name+".json"), tool)
	}
	files, err := os.ReadDir(snapshotDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		switch {
		case listed[f.Name()]:
		case golden.Updating():
			if err := os.Remove(filepath.Join(snapshotDir, f.Name())); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s/%s: no tool of that name is listed; remove the snapshot (go test -update does)", snapshotDir, f.Name())
		}
	}
}

// TestToolArguments checks rules across every built-in tool's input schema,
// which is derived from its arguments struct: every argument has a
// description for the model, every required argument is one of them, and
// no argument admits null as a type of its own (an optional argument is
// left out, and a client that sends null for one is not refused).
func TestToolArguments(t *testing.T) {
	t.Parallel()
	for _, tool := range builtinTools(t) {
		var schema struct {
			Properties map[string]struct {
				Type        any    `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		for name, p := range schema.Properties {
			if p.Description == "" {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
			if _, one := p.Type.(string); !one {
				t.Errorf("%s: argument %s has the type %v", tool.Name, name, p.Type)
			}
		}
		for _, name := range schema.Required {
			if _, ok := schema.Properties[name]; !ok {
				t.Errorf("%s: required argument %s is not among its properties", tool.Name, name)
			}
		}
	}
}
