package tools_test

import (
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
