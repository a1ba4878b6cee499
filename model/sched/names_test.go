package sched

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingNames are files outside this package still switching on policy
// names, each waiting for the branch that moves it onto the registry:
// sim/cluster and bench/sweep are wired to it in the fleet simulator's
// branch. A file listed here that no longer switches fails the test, so
// the list only shrinks.
var pendingNames = []string{}

// otherNames are files where a policy name's literal means something else.
var otherNames = map[string]string{
	"model/template/check.go": `"random" is Jinja's filter of that name`,
}

// TestNoPolicyNameSwitch holds the registry to being the only place
// policy names are decided on: no non-test Go source of the module outside
// model/sched has a case clause or an == or != comparison with a policy
// name's literal. Code that needs to know what a policy is reads the
// registry (Lookup, Policies, a profile's Signals).
func TestNoPolicyNameSwitch(t *testing.T) {
	root := filepath.Join("..", "..")
	names := map[string]bool{}
	for _, n := range Policies() {
		names[strconv.Quote(n)] = true
	}
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "model/sched" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		isName := func(e ast.Expr) bool {
			l, ok := e.(*ast.BasicLit)
			return ok && l.Kind == token.STRING && names[l.Value]
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				for _, e := range n.List {
					if isName(e) {
						found[rel] = append(found[rel], fset.Position(e.Pos()).String()+": case "+e.(*ast.BasicLit).Value)
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
					found[rel] = append(found[rel], fset.Position(n.Pos()).String()+": a comparison with a policy name")
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, hits := range found {
		if _, other := otherNames[file]; !other && !slices.Contains(pendingNames, file) {
			t.Errorf("%s decides on policy names; read model/sched's registry instead:\n  %s", file, strings.Join(hits, "\n  "))
		}
	}
	for _, file := range pendingNames {
		if found[file] == nil {
			t.Errorf("%s no longer decides on policy names: take it off pendingNames", file)
		}
	}
}
