package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// writingTools are the built-in tools that write at a Company, which
// --read-only hides.
var writingTools = []string{"send_message", "request_human", "close_conversation", "start_direct_conversation"}

// stdioSession runs `poppy-mcp serve args...` with env and connects the
// go-sdk client to it over stdio at the MCP revision rev.
func stdioSession(t *testing.T, rev string, env []string, args ...string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(binary, append([]string{"serve", "--state-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolNames lists the client's tools by name, sorted.
func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	var out []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tool.Name)
	}
	slices.Sort(out)
	return out
}

// checkReadOnly starts a Session with the Company at domain, whose tools
// are named under prefix, and checks what --read-only serves: the GET
// operation listReturns as a tool, marked readOnlyHint like every Company
// tool listed, no relayed MCP tool and no built-in tool that writes, and
// call_api refusing a POST.
func checkReadOnly(t *testing.T, cs *sdk.ClientSession, domain, prefix string) {
	t.Helper()
	callTool(t, cs, "start_session", map[string]any{"domain": domain})
	listed := map[string]*sdk.Tool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[tool.Name] = tool
	}
	if listed[prefix+"api_listReturns"] == nil || listed["call_api"] == nil || listed["discover_company"] == nil {
		t.Errorf("read-only lost a reading tool: %v", slices.Sorted(maps.Keys(listed)))
	}
	for name, tool := range listed {
		if strings.HasPrefix(name, prefix) && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
			t.Errorf("%s listed under read-only without readOnlyHint", name)
		}
		if strings.HasPrefix(name, prefix+"mcp") || slices.Contains(writingTools, name) {
			t.Errorf("%s listed under read-only", name)
		}
	}
	got := callTool(t, cs, "call_api", map[string]any{"domain": domain, "operation": "createReturn",
		"arguments": map[string]any{"order_id": "ord_1042", "reason": "too small"}})
	if got["error"] != "read_only" {
		t.Errorf("call_api createReturn under read-only = %v", got)
	}
}

// TestServeReadOnly: --read-only, or POPPY_READ_ONLY=1, over stdio at both
// revisions, over single-user HTTP and in hosted mode, with the demo
// Company and with poppytest.
func TestServeReadOnly(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("stdio/"+rev, func(t *testing.T) {
			checkReadOnly(t, stdioSession(t, rev, nil, "--demo", "--read-only"), demoDomain, "demo_poppy_example_")
		})
	}
	t.Run("POPPY_READ_ONLY", func(t *testing.T) {
		checkReadOnly(t, stdioSession(t, "2026-07-28", []string{"POPPY_READ_ONLY=1"}, "--demo"), demoDomain, "demo_poppy_example_")
	})
	t.Run("http", func(t *testing.T) {
		u, token, _ := startHTTP(t, nil, "--demo", "--http", "127.0.0.1:0", "--read-only")
		checkReadOnly(t, connectWith(t, u, token, "2025-11-25", nil), demoDomain, "demo_poppy_example_")
	})
	t.Run("hosted", func(t *testing.T) {
		h := startHosted(t, "--read-only")
		alice := connectAt(t, h.replicas[0].mcpURL, h.idp.AccessToken(t, "claude", "alice"), "2026-07-28")
		checkReadOnly(t, alice, "example.com", "example_com_")
	})
}

// TestServeToolsets: --toolsets and POPPY_TOOLSETS serve the groups named,
// and discovery, over stdio at both revisions.
func TestServeToolsets(t *testing.T) {
	t.Parallel()
	want := []string{"discover_company", "open_website", "sign_in_device", "sign_in_direct", "sign_in_mediated", "sign_in_status", "sign_out", "start_session"}
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			if got := toolNames(t, stdioSession(t, rev, nil, "--demo", "--toolsets", "signin,web")); !slices.Equal(got, want) {
				t.Errorf("--toolsets signin,web: %v, want %v", got, want)
			}
		})
	}
	t.Run("POPPY_TOOLSETS", func(t *testing.T) {
		cs := stdioSession(t, "2026-07-28", []string{"POPPY_TOOLSETS=signin,web"}, "--demo")
		callTool(t, cs, "start_session", map[string]any{"domain": demoDomain}) // no Company tool follows: apis and relay are off
		if got := toolNames(t, cs); !slices.Equal(got, want) {
			t.Errorf("POPPY_TOOLSETS=signin,web: %v, want %v", got, want)
		}
	})
}

// TestServeToolsetsUnknown: an unknown group, by flag or environment, or a
// POPPY_READ_ONLY that is not a boolean, stops serve at start with one line
// on stderr that says what to give, and exit status 2.
func TestServeToolsetsUnknown(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env        []string
		args, want []string
	}{
		"flag":            {nil, []string{"--toolsets", "signin,bogus"}, []string{`"bogus"`, "discovery, signin, conversations, apis, relay, web"}},
		"POPPY_TOOLSETS":  {[]string{"POPPY_TOOLSETS=webb"}, nil, []string{`"webb"`, "discovery, signin, conversations, apis, relay, web"}},
		"POPPY_READ_ONLY": {[]string{"POPPY_READ_ONLY=yes"}, nil, []string{"POPPY_READ_ONLY", "want 1 or 0"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := runBinary(t, tc.env, append([]string{"serve", "--demo", "--state-dir", t.TempDir()}, tc.args...)...)
			if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "poppy-mcp: ") {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%q does not say %s", errOut, w)
				}
			}
		})
	}
}
