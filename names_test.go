package itemops_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestExportedNames keeps the naming rules of docs/architecture.md "Names" over the
// exported names of every package of every module but internal ones. It parses every
// non-test Go file and fails on each name that begins with its package's name (phase.Set,
// not phase.PhaseSet), and on each package-level constant or variable that a field or a
// method of the same package also names (monitor.TimeoutMessage beside the field
// FinalizeStats.TimedOut).
func TestExportedNames(t *testing.T) {
	type pkgNames struct {
		values  map[string]string // constant or variable → where it is declared
		members map[string]string // field or method → its type and where it is declared
	}
	pkgs := map[string]*pkgNames{} // by directory
	var stutters []string
	files := parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if isInternal(dir+"/") || f.Name.Name == "main" {
			return
		}
		p := pkgs[dir]
		if p == nil {
			p = &pkgNames{values: map[string]string{}, members: map[string]string{}}
			pkgs[dir] = p
		}
		at := func(n ast.Node) string { return fset.Position(n.Pos()).String() }
		stutter := func(id *ast.Ident) {
			if id.IsExported() && repeatsPackage(f.Name.Name, id.Name) {
				stutters = append(stutters, fmt.Sprintf("%s: %s.%s", at(id), f.Name.Name, id.Name))
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				switch {
				case decl.Recv == nil:
					stutter(decl.Name)
				case decl.Name.IsExported():
					p.members[decl.Name.Name] = fmt.Sprintf("a method (%s)", at(decl.Name))
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						stutter(spec.Name)
						st, ok := spec.Type.(*ast.StructType)
						if !ok || !spec.Name.IsExported() {
							continue
						}
						for _, field := range st.Fields.List {
							for _, id := range field.Names {
								if id.IsExported() {
									p.members[id.Name] = fmt.Sprintf("the field %s.%s (%s)", spec.Name.Name, id.Name, at(id))
								}
							}
						}
					case *ast.ValueSpec:
						for _, id := range spec.Names {
							stutter(id)
							if id.IsExported() {
								p.values[id.Name] = at(id)
							}
						}
					}
				}
			}
		}
	})
	require.Greater(t, files, 100, "non-test Go files parsed")
	require.Empty(t, stutters, "names that repeat their package (docs/architecture.md \"Names\")")

	var shared []string
	for dir, p := range pkgs {
		for name, at := range p.values {
			if member, ok := p.members[name]; ok {
				shared = append(shared, fmt.Sprintf("%s: %s %s is also %s", at, dir, name, member))
			}
		}
	}
	slices.Sort(shared)
	require.Empty(t, shared, "constants or variables named as a field or method (docs/architecture.md \"Names\")")
}

// repeatsPackage reports whether name begins with the package name pkg, in any case,
// followed by an upper-case letter: PhaseSet in package phase, not Phases or Phase.
func repeatsPackage(pkg, name string) bool {
	if len(name) <= len(pkg) || !strings.EqualFold(name[:len(pkg)], pkg) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(name[len(pkg):])
	return unicode.IsUpper(r)
}

func TestRepeatsPackage(t *testing.T) {
	for _, tc := range []struct {
		pkg, name string
		want      bool
	}{
		{"phase", "PhaseSet", true},
		{"phase", "PhaseSetOf", true},
		{"monitor", "MonitorOption", true},
		{"phase", "Phase", false},  // the package's own type: nothing follows
		{"phase", "Phases", false}, // a plural, not a second word
		{"phase", "Set", false},
		{"kv", "Kvstore", false},
	} {
		require.Equal(t, tc.want, repeatsPackage(tc.pkg, tc.name), "repeatsPackage(%q, %q)", tc.pkg, tc.name)
	}
}
