package livecheck_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// TestYAMLAliasBomb: a Company whose OpenAPI document is a YAML alias bomb
// (517 KB, 757 MB once its aliases are expanded) is checked to the end: the
// document is refused with an error that names the alias expansion, and the
// probes fall back to a conversation read. Before, the run converted the
// document to 757 MB of JSON.
func TestYAMLAliasBomb(t *testing.T) {
	srv, _, c := company(t, nil, nil)
	srv.SetDocument("api.example.com", "/openapi.json", http.StatusOK, http.Header{"Content-Type": {"application/yaml"}},
		poppytest.YAMLAliasBomb(srv.URL("api.example.com", "/store")))
	rep, err := c.Run(context.Background(), "example.com")
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, dump(rep))
	}
	read := byID(rep)["api.read"]
	if read.Status != livecheck.Skipped || !strings.Contains(read.Message, "https://api.example.com/openapi.json: openapi2tools: YAML alias expansion: ") ||
		!strings.Contains(read.Message, "(at alias *big on line") {
		t.Errorf("api.read: %+v", read)
	}
}
