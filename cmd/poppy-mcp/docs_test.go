package main

// Tests that the documents stay true to the code they describe.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/tools"
)

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeListsEveryCommand: README's table of commands has a row for
// each command of the table, so a command added there is documented.
func TestReadmeListsEveryCommand(t *testing.T) {
	t.Parallel()
	readme := readRepoFile(t, "README.md")
	for _, c := range commands() {
		if !strings.Contains(readme, "| `poppy-mcp "+c.name) {
			t.Errorf("README's table of commands has no row for %s", c.name)
		}
	}
}

// TestBenchmarksPrintToolsListSizes: BENCHMARKS.md copies no tools/list
// size by hand (it had 19,511 bytes when the test measured 19,695, then
// 20,257); it names the tests that print the sizes, and scripts/bench.sh
// runs them.
func TestBenchmarksPrintToolsListSizes(t *testing.T) {
	t.Parallel()
	doc := readRepoFile(t, "BENCHMARKS.md")
	start := strings.Index(doc, "### tools/list size")
	if start < 0 {
		t.Fatal("BENCHMARKS.md has no tools/list section")
	}
	section := doc[start:]
	if end := strings.Index(section[1:], "\n#"); end >= 0 {
		section = section[:end+1]
	}
	if n := regexp.MustCompile(`\d{1,3},\d{3}`).FindString(section); n != "" {
		t.Errorf("the tools/list section quotes %s, a figure copied by hand", n)
	}
	for _, test := range []string{"TestToolsListBudget", "TestAPIGitHubExposure"} {
		if !strings.Contains(section, "go test ./tools -run "+test+" -v") {
			t.Errorf("the tools/list section does not name the command that prints %s's figure", test)
		}
		if !strings.Contains(readRepoFile(t, "scripts/bench.sh"), test) {
			t.Errorf("scripts/bench.sh does not run %s", test)
		}
	}
}

// TestExamplesReadmeEntries: examples/claude-config/README.md names every
// entry the files have, and what it says of poppy-http holds: it is in every
// file but Claude Desktop's, whose config takes only local servers.
func TestExamplesReadmeEntries(t *testing.T) {
	t.Parallel()
	readme := readRepoFile(t, "examples/claude-config/README.md")
	if !strings.Contains(readme, "in every file but Claude\nDesktop's") && !strings.Contains(readme, "in every file but Claude Desktop's") {
		t.Fatal("the README no longer says which files have poppy-http: update this test with it")
	}
	for name, key := range map[string]string{"claude_desktop_config.json": "mcpServers", ".mcp.json": "mcpServers",
		".cursor/mcp.json": "mcpServers", ".vscode/mcp.json": "servers"} {
		var doc map[string]json.RawMessage
		readJSON(t, filepath.Join("..", "..", "examples", "claude-config", name), &doc)
		var servers map[string]json.RawMessage
		if err := json.Unmarshal(doc[key], &servers); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for id := range servers {
			if !strings.Contains(readme, "`"+id+"`") {
				t.Errorf("%s has the entry %s, which the README does not name", name, id)
			}
		}
		if _, ok := servers["poppy-http"]; ok == (name == "claude_desktop_config.json") {
			t.Errorf("%s: poppy-http present %v, not as the README says", name, ok)
		}
	}
}

// TestReadmeListsEveryToolGroup: README's table of tool groups has a row
// for each group serve --toolsets takes.
func TestReadmeListsEveryToolGroup(t *testing.T) {
	t.Parallel()
	readme := readRepoFile(t, "README.md")
	for _, g := range tools.ToolGroups() {
		if !strings.Contains(readme, "| `"+g+"`") {
			t.Errorf("README's table of tool groups has no row for %s", g)
		}
	}
}
