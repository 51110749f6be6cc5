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
}

// TestExampleConfigs parses every file in examples/claude-config and checks
// that each command line is one `poppy-mcp serve` accepts.
func TestExampleConfigs(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "claude-config")
	files := map[string]string{ // file -> key of its servers object
		"claude_desktop_config.json": "mcpServers", ".mcp.json": "mcpServers",
		".cursor/mcp.json": "mcpServers", ".vscode/mcp.json": "servers",
	}
	for name, key := range files {
		t.Run(name, func(t *testing.T) {
			var doc map[string]map[string]exampleServer
			readJSON(t, filepath.Join(dir, name), &doc)
			servers := doc[key]
			if len(servers) < 2 {
				t.Fatalf("%s has %d servers under %q", name, len(servers), key)
			}
			for id, s := range servers {
				checkExampleServer(t, id, s)
			}
		})
	}
	t.Run("claude-code.sh", func(t *testing.T) {
		for _, args := range commandLines(t, filepath.Join(dir, "claude-code.sh"), "claude mcp add") {
			if i := indexOf(args, "--"); i >= 0 {
				checkServeArgs(t, args[i+1:])
			} else if !strings.HasPrefix(args[len(args)-1], "http://127.0.0.1:8808/mcp") {
				t.Errorf("claude mcp add without a command or the HTTP URL: %q", args)
			}
		}
	})
	t.Run("serve-http.sh", func(t *testing.T) {
		for _, args := range commandLines(t, filepath.Join(dir, "serve-http.sh"), "exec poppy-mcp") {
			checkServeArgs(t, args[1:])
		}
	})
}

func checkExampleServer(t *testing.T, id string, s exampleServer) {
	t.Helper()
	if s.URL != "" {
		if s.URL != "http://127.0.0.1:8808/mcp" {
			t.Errorf("%s: url %q is not where serve-http.sh listens", id, s.URL)
		}
		return
	}
	if s.Command != "poppy-mcp" {
		t.Errorf("%s: command %q", id, s.Command)
		return
	}
	checkServeArgs(t, s.Args)
	for k := range s.Env {
		if k != "POPPY_CLIENT_ID" && k != "POPPY_HTTP_TOKEN" && k != "POPPY_STATE_KEY" {
			t.Errorf("%s: unknown environment variable %s", id, k)
		}
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

var _ = json.Marshal
