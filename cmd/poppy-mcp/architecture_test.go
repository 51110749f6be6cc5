package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/poppy-mcp/poppy-mcp"

// TestArchitectureNamesEveryPackage: docs/architecture.md's table of
// packages has a row for every package `go list ./...` gives, no row for a
// package that is gone, and, in each row, the packages of this module that
// the package's non-test files import; its line of mcp-go's importers is
// the code's.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	t.Parallel()
	code := listPackages(t)
	doc, importers := architectureTable(t, readRepoFile(t, "docs/architecture.md"))
	for pkg, imports := range code {
		got, ok := doc[pkg]
		if !ok {
			t.Errorf("docs/architecture.md has no row for package %s", pkg)
			continue
		}
		if !slices.Equal(got, imports.own) {
			t.Errorf("docs/architecture.md: %s imports %v, the code imports %v", pkg, got, imports.own)
		}
	}
	for pkg := range doc {
		if _, ok := code[pkg]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, which `go list ./...` does not give", pkg)
		}
	}
	var want []string
	for pkg, imports := range code {
		if imports.mcpGo {
			want = append(want, pkg)
		}
	}
	slices.Sort(want)
	if !slices.Equal(importers, want) {
		t.Errorf("docs/architecture.md says mcp-go is imported by %v; the code: %v", importers, want)
	}
}

// packageImports is what one package's non-test files import.
type packageImports struct {
	own   []string // packages of this module, sorted, without the module path
	mcpGo bool     // any package of github.com/mark3labs/mcp-go
}

// listPackages runs `go list` on the module, keyed by directory.
func listPackages(t *testing.T) map[string]packageImports {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]packageImports{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		var p packageImports
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
				p.own = append(p.own, rel)
			}
			p.mcpGo = p.mcpGo || strings.HasPrefix(imp, "github.com/mark3labs/mcp-go/")
		}
		slices.Sort(p.own)
		pkgs[strings.TrimPrefix(fields[0], modulePath+"/")] = p
	}
	return pkgs
}

var backticked = regexp.MustCompile("`([^`]+)`")

// architectureTable reads the package table's rows (packages → the
// packages they import, sorted; a row may name several packages, which
// then import what it names) and the line that names mcp-go's importers.
func architectureTable(t *testing.T, doc string) (rows map[string][]string, mcpGo []string) {
	t.Helper()
	rows = map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(line, "mcp-go is imported by: "); ok {
			mcpGo = names(strings.SplitN(rest, ".", 2)[0])
			slices.Sort(mcpGo)
		}
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) != 3 {
			continue
		}
		imports := names(cells[2])
		slices.Sort(imports)
		for _, pkg := range names(cells[0]) {
			rows[pkg] = imports
		}
	}
	if len(rows) == 0 || mcpGo == nil {
		t.Fatal("docs/architecture.md: no package table, or no line \"mcp-go is imported by: ...\"")
	}
	return rows, mcpGo
}

// names are the backticked names in a cell.
func names(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}
