package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleServer is one entry of an assistant's MCP config, in the shapes
// Claude Desktop, Claude Code, Cursor and VS Code use.
type exampleServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// tokenHeaders is, for each file, the Authorization header its HTTP entry
// must send: POPPY_HTTP_TOKEN in the file's own syntax (VS Code asks once,
// with a password prompt), never a literal token.
var tokenHeaders = map[string]string{
	".mcp.json":        "Bearer ${POPPY_HTTP_TOKEN}",
	".cursor/mcp.json": "Bearer ${env:POPPY_HTTP_TOKEN}",
	".vscode/mcp.json": "Bearer ${input:poppy-http-token}",
}

// TestExampleConfigs parses every file in examples/claude-config and checks
// that each command line is one `poppy-mcp serve` accepts.
func TestExampleConfigs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "examples", "claude-config")
	files := map[string]string{ // file -> key of its servers object
		"claude_desktop_config.json": "mcpServers", ".mcp.json": "mcpServers",
		".cursor/mcp.json": "mcpServers", ".vscode/mcp.json": "servers",
	}
	for name, key := range files {
		t.Run(name, func(t *testing.T) {
			var doc map[string]json.RawMessage
			readJSON(t, filepath.Join(dir, name), &doc)
			var servers map[string]exampleServer
			if err := json.Unmarshal(doc[key], &servers); err != nil || len(servers) < 2 {
				t.Fatalf("%s has %d servers under %q (%v)", name, len(servers), key, err)
			}
			readOnly := false
			for id, s := range servers {
				checkExampleServer(t, name, id, s)
				readOnly = readOnly || indexOf(s.Args, "--read-only") >= 0
			}
			if !readOnly {
				t.Errorf("%s has no read-only entry (serve --read-only)", name)
			}
			if name == ".vscode/mcp.json" {
				checkVSCodeInput(t, doc["inputs"])
			}
		})
	}
	t.Run("claude-code.sh", func(t *testing.T) {
		readOnly := false
		for _, args := range commandLines(t, filepath.Join(dir, "claude-code.sh"), "claude mcp add") {
			readOnly = readOnly || indexOf(args, "--read-only") >= 0
			if i := indexOf(args, "--"); i >= 0 {
				checkServeArgs(t, args[i+1:])
				if strings.Contains(strings.Join(args, " "), "POPPY_CLIENT_ID") || indexOf(args, "--client-id") >= 0 {
					t.Errorf("%q names a client_id; serve uses the one init stored", strings.Join(args, " "))
				}
				continue
			}
			line := strings.Join(args, " ")
			if !strings.Contains(line, " http://127.0.0.1:8808/mcp ") || !strings.Contains(line, `--header "Authorization: Bearer $POPPY_HTTP_TOKEN"`) {
				t.Errorf("claude mcp add without a command, or the HTTP URL with the token: %q", line)
			}
		}
		if !readOnly {
			t.Error("claude-code.sh has no read-only line (serve --read-only)")
		}
	})
	t.Run("executable", func(t *testing.T) {
		for _, script := range []string{"serve-http.sh", "claude-code.sh"} {
			if fi, err := os.Stat(filepath.Join(dir, script)); err != nil || fi.Mode().Perm()&0o111 == 0 {
				t.Errorf("%s is not executable: %v %v", script, fi.Mode(), err)
			}
		}
	})
	t.Run("serve-http.sh", func(t *testing.T) {
		for _, args := range commandLines(t, filepath.Join(dir, "serve-http.sh"), "exec poppy-mcp") {
			checkServeArgs(t, args[1:])
		}
	})
}

func checkExampleServer(t *testing.T, file, id string, s exampleServer) {
	t.Helper()
	if s.URL != "" {
		if s.URL != "http://127.0.0.1:8808/mcp" {
			t.Errorf("%s: url %q is not where serve-http.sh listens", id, s.URL)
		}
		if got := s.Headers["Authorization"]; got != tokenHeaders[file] {
			t.Errorf("%s: Authorization %q, want %q: serve over HTTP needs its bearer token", id, got, tokenHeaders[file])
		}
		return
	}
	if s.Command != "poppy-mcp" {
		t.Errorf("%s: command %q", id, s.Command)
		return
	}
	checkServeArgs(t, s.Args)
	// An example client_id copied unedited would override the identity init
	// stored: serve needs none after init.
	if s.Env["POPPY_CLIENT_ID"] != "" || indexOf(s.Args, "--client-id") >= 0 {
		t.Errorf("%s: names a client_id; serve uses the one init stored", id)
	}
	for k := range s.Env {
		if k != "POPPY_CLIENT_ID" && k != "POPPY_HTTP_TOKEN" && k != "POPPY_STATE_KEY" {
			t.Errorf("%s: unknown environment variable %s", id, k)
		}
	}
}

// checkVSCodeInput checks that VS Code asks for the token as a password.
func checkVSCodeInput(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var inputs []struct {
		Type, ID string
		Password bool
	}
	if err := json.Unmarshal(raw, &inputs); err != nil || len(inputs) != 1 ||
		inputs[0].ID != "poppy-http-token" || inputs[0].Type != "promptString" || !inputs[0].Password {
		t.Errorf("VS Code inputs %s: want one promptString poppy-http-token with password: true (%v)", raw, err)
	}
}

// checkServeArgs checks a poppy-mcp command line (starting at the subcommand).
func checkServeArgs(t *testing.T, args []string) {
	t.Helper()
	if len(args) > 0 && args[0] == "poppy-mcp" {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	if _, err := parseServe(args, io.Discard); err != nil {
		t.Errorf("serve does not accept %q: %v", args, err)
	}
}

// commandLines returns the whitespace-split lines of a script that start with prefix.
func commandLines(t *testing.T, path, prefix string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			out = append(out, strings.Fields(line))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %q line", path, prefix)
	}
	return out
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
