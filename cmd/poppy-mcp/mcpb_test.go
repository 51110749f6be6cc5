package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// mcpbManifest is what this test reads of mcpb/manifest.json (the MCP
// Bundle format; scripts/release-check.sh validates the whole file with
// @anthropic-ai/mcpb).
type mcpbManifest struct {
	Server struct {
		Type       string        `json:"type"`
		EntryPoint string        `json:"entry_point"`
		MCPConfig  exampleServer `json:"mcp_config"`
	} `json:"server"`
	UserConfig map[string]struct {
		Type     string `json:"type"`
		Required bool   `json:"required"`
		Default  string `json:"default"`
	} `json:"user_config"`
}

// TestMCPBManifest: the bundle runs its own binary as `poppy-mcp serve`
// over stdio, with the state directory and the client ID as optional
// settings, and the command line serve accepts, both with the settings
// left empty (the defaults) and filled in.
func TestMCPBManifest(t *testing.T) {
	var m mcpbManifest
	readJSON(t, filepath.Join("..", "..", "mcpb", "manifest.json"), &m)
	cfg := m.Server.MCPConfig
	if m.Server.Type != "binary" || cfg.Command != "${__dirname}/"+m.Server.EntryPoint || m.Server.EntryPoint != "server/poppy-mcp" {
		t.Fatalf("server: %+v", m.Server)
	}
	for _, key := range []string{"state_dir", "client_id"} {
		if uc, ok := m.UserConfig[key]; !ok || uc.Required {
			t.Errorf("user_config %s: %+v, want an optional setting", key, uc)
		}
	}
	if len(cfg.Args) == 0 || cfg.Args[0] != "serve" {
		t.Fatalf("args %q: want serve", cfg.Args)
	}
	for name, values := range map[string]map[string]string{
		"defaults":  {"state_dir": "", "client_id": ""},
		"filled in": {"state_dir": t.TempDir(), "client_id": "https://agent.example/agent.json"},
	} {
		sub := func(s string) string {
			for k, v := range values {
				s = strings.ReplaceAll(s, "${user_config."+k+"}", v)
			}
			return s
		}
		var args []string
		for _, a := range cfg.Args[1:] {
			args = append(args, sub(a))
		}
		for k, v := range cfg.Env {
			t.Setenv(k, sub(v))
		}
		parsed, err := parseServe(args, io.Discard)
		if err != nil {
			t.Errorf("%s: serve %q: %v", name, args, err)
			continue
		}
		if parsed.stateDir != values["state_dir"] || parsed.clientID != values["client_id"] || parsed.http.Addr != "" {
			t.Errorf("%s: serve %q got state %q, client ID %q, --http %q", name, args, parsed.stateDir, parsed.clientID, parsed.http.Addr)
		}
	}
}
