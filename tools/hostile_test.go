package tools_test

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// hostileCase is one way a Company on the internet can attack the agent: a
// poppytest configured to misbehave, and what poppy-mcp must still do. The
// next hostile idea is one more row in one of the groups below.
type hostileCase struct {
	name string
	// opts are the poppytest knobs that make the Company hostile.
	opts *poppytest.Options
	// harness builds poppy-mcp's harness options (more names mapped, a
	// shorter document deadline). Nil: the defaults.
	harness func(t *testing.T) *harnessOptions
	// setup runs on the Company before the MCP client connects (documents,
	// handlers). Nil: nothing.
	setup func(t *testing.T, h *harness)
	// run drives poppy-mcp through a real MCP client and checks that it holds.
	run func(t *testing.T, h *harness, cs *sdk.ClientSession)
}

// TestHostileCompany runs every hostile-Company case against poppytest, each
// through the official go-sdk client at the newest MCP revision. Each group
// lives beside the code it attacks: the network (addresses, redirects, slow
// bodies), Company text (forged roles, format characters), conversations
// (endless pages, delta floods) and tool names.
func TestHostileCompany(t *testing.T) {
	t.Parallel()
	groups := [][]hostileCase{
		hostileNetworkCases(),
		hostileTextCases(),
		hostileConversationCases(),
		hostileNameCases(),
	}
	for _, group := range groups {
		for _, c := range group {
			t.Run(c.name, func(t *testing.T) {
				var hopts *harnessOptions
				if c.harness != nil {
					hopts = c.harness(t)
				}
				h := newHarnessWith(t, c.opts, hopts)
				if c.setup != nil {
					c.setup(t, h)
				}
				cs := h.connect(t, revisions[len(revisions)-1])
				c.run(t, h, cs)
			})
		}
	}
}
