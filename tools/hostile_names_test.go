package tools_test

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// hostileNameCases are the hostile-Company cases of this group (see
// TestHostileCompany): Companies whose domains are chosen to take, block or
// pass for another Company's tool names.
func hostileNameCases() []hostileCase {
	return []hostileCase{
		// shop.io.mcp.ax's label (shop_io_mcp_ax) once began with shop.io's
		// relay prefix (shop_io_mcp_): whichever came second was refused as
		// "taken", so a hostile Company found first blocked shop.io's tools,
		// and shop.io found first blocked it. Both now keep their own names,
		// in either order.
		twoCompaniesCase("prefix attack, attacker found first", "shop.io", "shop.io.mcp.ax", true),
		twoCompaniesCase("prefix attack, attacker found second", "shop.io", "shop.io.mcp.ax", false),
		// A lookalike of example.com, found first, gets names of its own
		// that never take example.com's, and every description says whose
		// tool it is.
		twoCompaniesCase("lookalike domain found first", "example.com", "examp1e.com", true),
	}
}

// twoCompaniesCase is a harness Company at victim and another Company at
// attacker, discovered in that order or the other: each one's relayed MCP
// tools and API operation tools appear under its own domain's names, and a
// call of each reaches its own Company.
func twoCompaniesCase(name, victim, attacker string, attackerFirst bool) hostileCase {
	var other *poppytest.Server
	return hostileCase{
		name: name,
		opts: &poppytest.Options{Domain: victim},
		harness: func(t *testing.T) *harnessOptions {
			other = poppytest.NewServer(t, &poppytest.Options{Domain: attacker})
			return &harnessOptions{Companies: []*poppytest.Server{other}}
		},
		run: func(t *testing.T, h *harness, cs *sdk.ClientSession) {
			order := []string{victim, attacker}
			if attackerFirst {
				order = []string{attacker, victim}
			}
			for _, d := range order {
				if res, got := call(t, cs, "start_session", map[string]any{"domain": d}); res.IsError {
					t.Fatalf("start_session %s: %v", d, got)
				}
			}
			for _, c := range []*poppytest.Server{h.company, other} {
				wantOwnTools(t, cs, c)
			}
			if strings.Contains(h.logs.String(), "taken") {
				t.Errorf("a prefix was refused as taken:\n%s", h.logs.String())
			}
		},
	}
}

// wantOwnTools checks that the Company's relayed search and its
// listProducts operation are tools under its own domain's label, described
// as its own, and that calling them reaches it.
func wantOwnTools(t *testing.T, cs *sdk.ClientSession, c *poppytest.Server) {
	t.Helper()
	label := tools.DomainLabel(c.Domain())
	names := []string{label + "_mcp_search_products", label + "_api_listProducts"}
	listed := map[string]*sdk.Tool{}
	waitUntil(t, "the tools of "+c.Domain(), func() bool {
		listed = listTools(t, cs)
		return listed[names[0]] != nil && listed[names[1]] != nil
	})
	for _, n := range names {
		if !strings.HasPrefix(listed[n].Description, "["+c.Domain()+" ") {
			t.Errorf("%s is described as %q, not as %s's", n, listed[n].Description, c.Domain())
		}
	}
	mcpBefore, apiBefore := c.Count("mcp."+c.Domain(), "/mcp"), c.Count("api."+c.Domain(), "/store/products")
	if res, got := call2(t, cs, names[0], map[string]any{"query": "hat"}); res.IsError || !strings.Contains(got, "Rain hat") {
		t.Errorf("%s: %s", names[0], got)
	}
	if res, got := call(t, cs, names[1], map[string]any{"q": "rain"}); res.IsError || got["status"] != 200.0 {
		t.Errorf("%s: %v", names[1], got)
	}
	if c.Count("mcp."+c.Domain(), "/mcp") == mcpBefore || c.Count("api."+c.Domain(), "/store/products") == apiBefore {
		t.Errorf("the calls of %s's tools did not reach %s", c.Domain(), c.Domain())
	}
}

// listTools lists every tool of the client, by name.
func listTools(t *testing.T, cs *sdk.ClientSession) map[string]*sdk.Tool {
	t.Helper()
	out := map[string]*sdk.Tool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}
