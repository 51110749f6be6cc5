// Package pkgstate finds package-level state in Go source, for tests that
// keep a package free of it: every init function, and every package-level
// variable but those that hold a value that never changes.
//
// A variable passes only when two things hold. Its initializer is one of
// the forms Go code uses for values that are built once and then only read:
// an error sentinel (errors.New, fmt.Errorf, or the address of a composite
// literal of a type whose name ends in Error), a compiled regular expression
// (regexp.MustCompile) or a compiled template (template.Must, html or text).
// And no statement of the package assigns to it, increments it or takes its
// address. Anything else (a map, a slice, a counter, a clock seam such as
// timeNow, a variable without an initializer) is state: it belongs in the
// structs a caller builds, where it can be found by following calls.
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
// order of the files' names and of the declarations in each, then the
// assignments to package-level variables.
func Find(dir string) ([]string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		// Object resolution ties each identifier to its declaration in the
		// same file; one left unresolved names a package-level declaration
		// of another file (or a predeclared one).
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("pkgstate: %w", err)
		}
		files = append(files, f)
	}
	var out []string
	vars := &packageVars{names: map[string]bool{}, specs: map[*ast.ValueSpec]bool{}}
	for _, f := range files {
		out = append(out, inFile(fset, f, vars)...)
	}
	for _, f := range files {
		out = append(out, assignments(fset, f, vars)...)
	}
	return out, nil
}

// inFile lists what Find reports of one file's declarations, and adds its
// package-level variables to vars.
func inFile(fset *token.FileSet, f *ast.File, vars *packageVars) []string {
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
				vars.specs[vs] = true
				for i, n := range vs.Names {
					if n.Name == "_" {
						continue
					}
					vars.names[n.Name] = true
					if i < len(vs.Values) && constant(vs.Values[i]) {
						continue
					}
					out = append(out, fmt.Sprintf("%s: var %s", fset.Position(n.Pos()), n.Name))
				}
			}
		}
	}
	return out
}

// assignments lists the statements of f that assign to, increment or take
// the address of a package-level variable.
func assignments(fset *token.FileSet, f *ast.File, vars *packageVars) []string {
	var out []string
	report := func(e ast.Expr, what string) {
		if id, ok := ast.Unparen(e).(*ast.Ident); ok && packageLevel(id, vars) {
			out = append(out, fmt.Sprintf("%s: %s %s", fset.Position(id.Pos()), what, id.Name))
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if n.Tok != token.DEFINE {
					for _, lhs := range n.Lhs {
						report(lhs, "assigns")
					}
				}
			case *ast.IncDecStmt:
				report(n.X, "assigns")
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					report(n.X, "takes the address of")
				}
			}
			return true
		})
	}
	return out
}

// packageLevel reports whether id names a package-level variable: one of
// the package's that id resolves to, or that it leaves unresolved (declared
// in another file), rather than a local of the same name.
func packageLevel(id *ast.Ident, vars *packageVars) bool {
	if !vars.names[id.Name] {
		return false
	}
	if id.Obj == nil {
		return true
	}
	vs, ok := id.Obj.Decl.(*ast.ValueSpec)
	return ok && vars.specs[vs]
}

// packageVars are a package's package-level variables.
type packageVars struct {
	names map[string]bool
	specs map[*ast.ValueSpec]bool
}

// constant reports whether a variable's value is one that by convention is
// never assigned again: errors.New(...), fmt.Errorf(...),
// regexp.MustCompile(...), template.Must(...), or the address of an error
// literal (&Error{...}). Find checks that nothing assigns it all the same.
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
		case "errors.New", "fmt.Errorf", "regexp.MustCompile", "template.Must":
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
