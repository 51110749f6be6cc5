package tools_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/internal/golden"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// toolsetCases are the tool choices whose tools/list is pinned, each in
// testdata/toolsets/NAME.json.
var toolsetCases = []struct {
	name     string
	readOnly bool
	toolsets string
}{
	{"default", false, ""},
	{"read-only", true, ""},
	{"signin-web", false, "signin,web"},
}

// listedTool is a tool as the toolsets snapshots keep it: what tells the
// tools apart and what read-only changes (every built-in tool's full
// definition is pinned in testdata/toolsnaps already).
type listedTool struct {
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Annotations *sdk.ToolAnnotations `json:"annotations"`
}

// toolsetHarness is a harness serving the tools of one choice, with a
// client at revision rev that has started a Session with example.com, so
// that the Company's tools (per-operation and relayed) are announced where
// the choice lets them be.
func toolsetHarness(t *testing.T, rev string, readOnly bool, list string) (*harness, *sdk.ClientSession) {
	t.Helper()
	ts, err := tools.ParseToolsets(list)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, nil, &harnessOptions{ReadOnly: readOnly, Toolsets: ts})
	cs := h.connect(t, rev)
	if res, got := call(t, cs, "start_session", map[string]any{"domain": "example.com"}); res.IsError {
		t.Fatalf("start_session: %v", got)
	}
	return h, cs
}

// listedTools is the client's tools/list (listTools), sorted by name.
func listedTools(t *testing.T, cs *sdk.ClientSession) []listedTool {
	t.Helper()
	var out []listedTool
	for _, tool := range listTools(t, cs) {
		out = append(out, listedTool{tool.Name, tool.Description, tool.Annotations})
	}
	slices.SortFunc(out, func(a, b listedTool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TestToolsetSnapshots pins the tools/list of the default, of --read-only
// and of --toolsets signin,web, after a Session with poppytest's
// example.com started, at both MCP revisions (one file for both: they
// list the same tools). go test -update rewrites them.
func TestToolsetSnapshots(t *testing.T) {
	t.Parallel()
	for _, tc := range toolsetCases {
		for _, rev := range revisions {
			t.Run(tc.name+"/"+rev, func(t *testing.T) {
				_, cs := toolsetHarness(t, rev, tc.readOnly, tc.toolsets)
				listed := listedTools(t, cs)
				golden.CheckJSON(t, filepath.Join("testdata", "toolsets", tc.name+".json"), listed)
				if tc.name == "default" && (!hasPrefix(listed, apiPrefix) || !hasPrefix(listed, relayPrefix)) {
					t.Errorf("default: the Company's tools are not all listed: %v", names(listed))
				}
			})
		}
	}
}

// TestReadOnlyCompanyTools: under read-only every Company tool listed is
// marked readOnlyHint (the GET operations' own tools stay), no relayed MCP
// tool is listed, and no built-in tool that writes is.
func TestReadOnlyCompanyTools(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			_, cs := toolsetHarness(t, rev, true, "")
			if !strings.Contains(cs.InitializeResult().Instructions, "read-only") {
				t.Errorf("the instructions do not say the server is read-only: %q", cs.InitializeResult().Instructions)
			}
			listed := listedTools(t, cs)
			if !slices.Contains(names(listed), apiPrefix+"listProducts") {
				t.Errorf("the GET operation listProducts has no tool: %v", names(listed))
			}
			for _, tool := range listed {
				company := strings.HasPrefix(tool.Name, "example_com_")
				if company && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
					t.Errorf("%s is listed under read-only without readOnlyHint: %+v", tool.Name, tool.Annotations)
				}
				if strings.HasPrefix(tool.Name, relayPrefix) {
					t.Errorf("relayed tool %s listed under read-only", tool.Name)
				}
				switch tool.Name {
				case "send_message", "request_human", "close_conversation", "start_direct_conversation":
					t.Errorf("%s listed under read-only", tool.Name)
				}
			}
		})
	}
}

// TestHiddenToolRefused: a tool that a choice hides cannot be called by its
// name either: mcp-go answers that there is no such tool, and the Company
// sees no request for it.
func TestHiddenToolRefused(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			hidden := map[string][]string{
				"read-only":  {"send_message", "request_human", apiPrefix + "createReturn", relayPrefix + "order_status"},
				"signin,web": {"call_api", "send_message", apiPrefix + "listProducts", relayPrefix + "order_status"},
			}
			for choice, names := range hidden {
				h, cs := toolsetHarness(t, rev, choice == "read-only", strings.TrimPrefix(choice, "read-only"))
				before := len(h.company.Requests())
				for _, name := range names {
					args := map[string]any{"domain": "example.com", "text": "hello", "conversation_id": "c1", "order_id": "ord_1042", "reason": "too small"}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
					cancel()
					if err == nil || !strings.Contains(err.Error(), "not found") {
						t.Errorf("%s: calling hidden %s gave %+v, %v; want tool not found", choice, name, res, err)
					}
				}
				if after := h.company.Requests(); len(after) != before {
					t.Errorf("%s: the Company saw %d requests for hidden tools: %+v", choice, len(after)-before, after[before:])
				}
			}
		})
	}
}

// TestReadOnlyCallAPI: under read-only call_api refuses a POST operation
// with a result that says the server is read-only, and sends the Company
// nothing; a GET operation is called as usual.
func TestReadOnlyCallAPI(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h, cs := toolsetHarness(t, rev, true, "")
			before := len(h.company.Requests())
			res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "createReturn",
				"arguments": map[string]any{"order_id": "ord_1042", "reason": "too small"}})
			text := res.Content[0].(*sdk.TextContent).Text
			if !res.IsError || got["error"] != "read_only" || got["method"] != "POST" || !strings.Contains(text, "read-only") {
				t.Errorf("call_api createReturn under read-only = %v %q", got, text)
			}
			if after := h.company.Requests(); len(after) != before {
				t.Errorf("the Company saw %d requests for a refused POST: %+v", len(after)-before, after[before:])
			}
			res, got = call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts",
				"arguments": map[string]any{"q": "stormline"}})
			if res.IsError || got["status"] != 200.0 {
				t.Errorf("call_api listProducts under read-only = %v", got)
			}
			if _, got = call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"}); !strings.Contains(got["next"].(string), "read-only") {
				t.Errorf("list_api_operations under read-only does not say so: %v", got["next"])
			}
		})
	}
}

// TestToolsetsWithoutSignIn: without the signin group, a call that needs a
// sign-in says so and names no sign-in tool, since none is served.
func TestToolsetsWithoutSignIn(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			_, cs := toolsetHarness(t, rev, false, "apis")
			res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listOrders"})
			if !res.IsError || got["error"] != "sign_in_required" || got["tool"] != "" || !strings.Contains(got["next"].(string), "no sign-in tools") {
				t.Errorf("call_api listOrders without signin = %v", got)
			}
		})
	}
}

// TestParseToolsets: names are trimmed and case-insensitive, discovery is
// always on, all or nothing means every group, and an unknown name is an
// error that names the groups.
func TestParseToolsets(t *testing.T) {
	t.Parallel()
	for list, want := range map[string]string{
		"": "all", " , ": "all", "all": "all", "signin,all": "all", "signin, Web": "discovery,signin,web",
		"relay": "discovery,relay", "discovery": "discovery",
	} {
		ts, err := tools.ParseToolsets(list)
		if err != nil || ts.String() != want {
			t.Errorf("ParseToolsets(%q) = %s, %v; want %s", list, ts, err, want)
		}
	}
	for _, list := range []string{"bogus", "signin,bogus", "all,bogus", "sign-in"} {
		_, err := tools.ParseToolsets(list)
		if err == nil || !strings.Contains(err.Error(), "discovery, signin, conversations, apis, relay, web") {
			t.Errorf("ParseToolsets(%q) = %v; want an error naming the groups", list, err)
		}
	}
	var zero tools.Toolsets
	if !zero.Has("relay") || zero.String() != "all" {
		t.Errorf("the zero Toolsets do not serve every group")
	}
}

func names(ts []listedTool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func hasPrefix(ts []listedTool, prefix string) bool {
	return slices.ContainsFunc(ts, func(t listedTool) bool { return strings.HasPrefix(t.Name, prefix) })
}

// FuzzParseToolsets: any list either fails or reads as groups that read
// back the same (String, then ParseToolsets again).
func FuzzParseToolsets(f *testing.F) {
	for _, seed := range []string{"", "all", "signin,web", " Relay ,,apis", "bogus", "all,bogus", "\x00,web"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, list string) {
		ts, err := tools.ParseToolsets(list)
		if err != nil {
			return
		}
		again, err := tools.ParseToolsets(ts.String())
		if err != nil || again.String() != ts.String() {
			t.Errorf("ParseToolsets(%q) = %s, which reads back as %s, %v", list, ts, again, err)
		}
	})
}

// TestAdviceNamesUnofferedTools: advice is written once for every choice,
// so a result that names a tool this server does not serve ("start one
// with send_message" under read-only) says that the tool is not offered
// and why, and the model tells the user instead of calling a tool that is
// not there.
func TestAdviceNamesUnofferedTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		readOnly bool
		toolsets string
		call     string
		args     map[string]any
		hidden   string
		why      string
	}{
		{true, "", "list_conversations", map[string]any{"domain": "example.com"}, "send_message", "it is read-only"},
		{false, "signin,apis", "sign_in_status", map[string]any{"domain": "example.com"}, "", ""},
		{false, "conversations", "list_conversations", map[string]any{"domain": "example.com"}, "", ""},
	} {
		for _, rev := range revisions {
			t.Run(fmt.Sprintf("%v/%s/%s/%s", tc.readOnly, tc.toolsets, tc.call, rev), func(t *testing.T) {
				_, cs := toolsetHarness(t, rev, tc.readOnly, tc.toolsets)
				res, _ := call(t, cs, tc.call, tc.args)
				text := res.Content[0].(*sdk.TextContent).Text
				served := map[string]bool{}
				for _, tool := range listTools(t, cs) {
					served[tool.Name] = true
				}
				summary, note, _ := strings.Cut(text, "\nThis poppy-mcp does not offer ")
				for _, name := range builtinToolNames {
					if !served[name] && strings.Contains(summary, name) && !strings.Contains(note, name) {
						t.Errorf("%s names %s, which is not served, and does not say so:\n%s", tc.call, name, text)
					}
				}
				if tc.hidden != "" && (!strings.Contains(note, tc.hidden) || !strings.Contains(note, tc.why)) {
					t.Errorf("%s: no note that %s is not offered (%s):\n%s", tc.call, tc.hidden, tc.why, text)
				}
			})
		}
	}
}

// builtinToolNames are poppy-mcp's own tools, every group's.
var builtinToolNames = []string{"discover_company", "start_session", "sign_in_device", "sign_in_mediated", "sign_in_direct",
	"sign_in_status", "sign_out", "send_message", "read_events", "request_human", "close_conversation", "list_conversations",
	"start_direct_conversation", "list_api_operations", "describe_api_operation", "call_api", "open_website", "browse_page"}
