// Package pkgstate finds package-level state in Go source, for tests that
// keep a package free of it: every init function, and every package-level
// variable but the ones that are never assigned after they are declared by
// convention (error sentinels and compiled regular expressions). State
// belongs in the structs a caller builds, where it can be found by
// following calls.
package pkgstate

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// Find lists the init functions and mutable package-level variables of the
// package in dir, test files left out, as "file:line:col: what", in the
// order of the files' names and of the declarations in each.
func Find(dir string) ([]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("pkgstate: %w", err)
		}
		out = append(out, inFile(fset, f)...)
	}
	return out, nil
}

// inFile lists what Find reports in one file.
func inFile(fset *token.FileSet, f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" {
				out = append(out, fmt.Sprintf("%s: func init", fset.Position(d.Pos())))
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, spec := range d.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == "_" || i < len(vs.Values) && constant(vs.Values[i]) {
						continue
					}
					out = append(out, fmt.Sprintf("%s: var %s", fset.Position(n.Pos()), n.Name))
				}
			}
		}
	}
	return out
}

// constant reports whether a variable's value is one that by convention is
// never assigned again: errors.New(...), fmt.Errorf(...),
// regexp.MustCompile(...), or the address of an error literal (&Error{...}).
func constant(v ast.Expr) bool {
	switch v := v.(type) {
	case *ast.CallExpr:
		sel, ok := v.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return false
		}
		switch pkg.Name + "." + sel.Sel.Name {
		case "errors.New", "fmt.Errorf", "regexp.MustCompile":
			return true
		}
	case *ast.UnaryExpr:
		lit, ok := v.X.(*ast.CompositeLit)
		if !ok || v.Op != token.AND {
			return false
		}
		id, ok := lit.Type.(*ast.Ident)
		return ok && strings.HasSuffix(id.Name, "Error")
	}
	return false
}

// T is what Check needs of a test; *testing.T satisfies it.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// Check fails t for each init function and mutable package-level variable
// of the package in dir.
func Check(t T, dir string) {
	t.Helper()
	found, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("package state: %s", f)
	}
}
