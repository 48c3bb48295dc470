package itemops_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/racebuild"
)

// TestNoForeignInterfaceImplemented keeps the rule of docs/architecture.md "Dependency
// hygiene": itemops never implements an interface that a dependency owns, because a
// dependency may add a method to it in any minor release (apimachinery's labels.Labels
// gained Lookup in v0.34.0, and a hand-made implementation stopped compiling for every
// user on newer libraries). It type-checks every non-test package of the module from
// source, with its dependencies read from the compiler's export data, and fails on each
// type of ours that satisfies a non-empty interface declared in a package outside the
// standard library and this module. Use the dependency's own types instead (labels.Set
// for labels.Labels) or declare a small interface of our own.
func TestNoForeignInterfaceImplemented(t *testing.T) {
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Standard                bool
		Module                  *struct{ Path string }
	}
	// The export data of the packages the tests were built from (see racebuild).
	args := append([]string{"list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,Standard,Module"}, racebuild.Flags()...)
	all := goJSON[listed](t, append(args, "./...")...)
	exports := map[string]string{}
	var ours []listed
	for _, p := range all {
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == mod {
			ours = append(ours, p)
		}
	}
	require.NotEmpty(t, ours)

	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	foreign := func(p *types.Package) bool {
		path := p.Path()
		if path == mod || strings.HasPrefix(path, mod+"/") {
			return false
		}
		first, _, _ := strings.Cut(path, "/")
		return strings.Contains(first, ".") // the standard library's paths have no dot
	}

	var found []string
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
		pkg, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, nil)
		require.NoError(t, err, "type-check %s", p.ImportPath)

		// The interfaces of every foreign package this one reaches.
		type iface struct {
			name string
			typ  *types.Interface
		}
		var ifaces []iface
		seen := map[*types.Package]bool{}
		var visit func(*types.Package)
		visit = func(dep *types.Package) {
			if seen[dep] {
				return
			}
			seen[dep] = true
			for _, d := range dep.Imports() {
				visit(d)
			}
			if !foreign(dep) {
				return
			}
			scope := dep.Scope()
			for _, name := range scope.Names() {
				tn, ok := scope.Lookup(name).(*types.TypeName)
				if !ok || !tn.Exported() {
					continue
				}
				if it, ok := tn.Type().Underlying().(*types.Interface); ok && it.NumMethods() > 0 {
					ifaces = append(ifaces, iface{dep.Path() + "." + name, it})
				}
			}
		}
		visit(pkg)

		scope := pkg.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			if _, isIface := tn.Type().Underlying().(*types.Interface); isIface {
				continue
			}
			for _, it := range ifaces {
				if types.Implements(tn.Type(), it.typ) || types.Implements(types.NewPointer(tn.Type()), it.typ) {
					found = append(found, fmt.Sprintf("%s.%s implements %s", p.ImportPath, name, it.name))
				}
			}
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		t.Errorf("itemops must not implement interfaces its dependencies own (they may grow a method in any minor release; see docs/architecture.md \"Dependency hygiene\"):\n\t%s", strings.Join(found, "\n\t"))
	}
}
