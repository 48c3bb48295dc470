package itemops_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"go/ast"

	"go/doc"

	"go/parser"

	"go/token"

	"path/filepath"

	"slices"
)

// goJSON runs the go command and decodes its stream of JSON values into a slice of T.
func goJSON[T any](t *testing.T, args ...string) []T {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)
	return decodeAll[T](t, out)
}

// goJSONIn is goJSON in the module in dir (see goIn).
func goJSONIn[T any](t *testing.T, dir string, args ...string) []T {
	t.Helper()
	return decodeAll[T](t, goIn(t, dir, args...))
}

// decodeAll decodes a stream of JSON values into a slice of T.
func decodeAll[T any](t *testing.T, out []byte) []T {
	t.Helper()
	var all []T
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var v T
		if err := dec.Decode(&v); err == io.EOF {
			return all
		} else {
			require.NoError(t, err)
		}
		all = append(all, v)
	}
}

// semver splits "v1.2.3" (or "1.23.0", "1.23") into numbers; missing parts are zero.
func semver(t *testing.T, v string) [3]int {
	t.Helper()
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "-")
	var out [3]int
	for i, part := range strings.SplitN(v, ".", 3) {
		n, err := strconv.Atoi(part)
		require.NoError(t, err, "version %q", v)
		out[i] = n
	}
	return out
}

// TestDependencyHygiene keeps the promises of DESIGN.md "Dependency hygiene": importing
// itemops must not move a Velero 1.16 fork's go line or any k8s.io version.
func TestDependencyHygiene(t *testing.T) {
	type module struct {
		Path, Version string
		Main          bool
		Indirect      bool
	}
	type gomod struct {
		Go      string
		Require []struct {
			Path     string
			Version  string
			Indirect bool
		}
	}
	mods := goJSON[gomod](t, "mod", "edit", "-json")
	require.Len(t, mods, 1)
	goLine := semver(t, mods[0].Go)
	require.True(t, goLine[0] == 1 && goLine[1] <= 23, "go line %s breaks the upper bound of 1.23: a Velero 1.16 fork is on go 1.23, and importing itemops must not raise it (DESIGN.md \"Dependency hygiene\")", mods[0].Go)

	allowed := map[string]bool{
		"github.com/looplab/fsm":      true,
		"github.com/stretchr/testify": true,
		"github.com/google/go-cmp":    true,
		"k8s.io/apimachinery":         true,
		"go.etcd.io/bbolt":            true,
		"go.uber.org/goleak":          true, // tests only: catches leaked goroutines
	}
	for _, r := range mods[0].Require {
		if !r.Indirect {
			require.True(t, allowed[r.Path], "direct dependency %s is not allowed by DESIGN.md", r.Path)
		}
	}

	for _, m := range goJSON[module](t, "list", "-m", "-json", "all") {
		if m.Main {
			continue
		}
		v := semver(t, m.Version)
		switch {
		case strings.HasPrefix(m.Path, "k8s.io/") && m.Path != "k8s.io/klog/v2" && m.Path != "k8s.io/utils" && m.Path != "k8s.io/kube-openapi":
			require.True(t, v[0] == 0 && v[1] <= 31,
				"%s %s breaks the lower bound: the library must build on k8s.io v0.31.x, what a Velero 1.16 fork has (DESIGN.md \"Dependency hygiene\"); code that needs a newer apimachinery cannot go in, and the newest versions are tested by .ci/run's matrix, not by raising go.mod", m.Path, m.Version)
		case m.Path == "go.etcd.io/bbolt":
			require.True(t, v[0] == 1 && v[1] == 4, "bbolt %s is not v1.4.x", m.Version)
		case m.Path == "github.com/looplab/fsm":
			require.Equal(t, "v1.0.3", m.Version)
		}
	}
}

// TestImportLayers keeps the one-way imports of DESIGN.md: a package imports only the
// itemops packages below it.
func TestImportLayers(t *testing.T) {
	const mod = "github.com/itemops/itemops"
	// may lists, for each package (or prefix ending in "/"), the itemops packages it may
	// import; internal/ packages may be imported by anything. storetest, the suite every
	// store runs, uses the scriptable trackers of operationstest for its Monitor checks.
	may := map[string][]string{
		"phase":                     nil,
		"clock":                     nil,
		"clock/clocktest":           {"clock"},
		"progress":                  {"clock"},
		"restoreorder":              nil,
		"operations":                {"phase", "clock"},
		"operations/operationstest": {"operations", "phase"},
		"operations/opsfile":        {"operations", "phase"},
		"operations/monitor":        {"operations", "phase", "clock"},
		"adapters":                  {"operations", "phase", "clock"},
		"adapters/adaptertest":      {"adapters", "operations", "phase", "clock"},
		"storage/":                  {"operations", "phase", "storage/kv"},
		"storage/storetest":         {"operations", "operations/monitor", "operations/operationstest", "phase"},
	}
	type pkg struct {
		ImportPath string
		Imports    []string
	}
	for _, p := range goJSON[pkg](t, "list", "-json=ImportPath,Imports", "./...") {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		if rel == "" || strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "examples/") {
			continue
		}
		// The longest key that names the package, or a prefix of it, rules.
		var allowed []string
		found, rule := false, ""
		for k, v := range may {
			if (rel == k || (strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k))) && len(k) > len(rule) {
				allowed, found, rule = v, true, k
			}
		}
		require.True(t, found, "package %s has no place in the layering; add it to TestImportLayers", rel)
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, mod+"/")
			if !ok || strings.HasPrefix(irel, "internal/") {
				continue
			}
			ok = false
			for _, a := range allowed {
				ok = ok || irel == a
			}
			require.True(t, ok, "%s imports %s, against the layering", rel, irel)
		}
	}
}

// exportedNames returns the exported names of the package in dir, as go doc lists them:
// constants, variables, functions, types, and the methods of exported types (interface
// methods and struct fields are not counted). Test files are left out.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	type pkg struct {
		ImportPath string
		Dir        string
		GoFiles    []string
	}
	pkgs := goJSON[pkg](t, "list", "-json=ImportPath,Dir,GoFiles", "./"+dir)
	require.Len(t, pkgs, 1)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkgs[0].GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkgs[0].Dir, name), nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, pkgs[0].ImportPath)
	require.NoError(t, err)
	var names []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	funcs := func(fs []*doc.Func, prefix string) {
		for _, f := range fs {
			names = append(names, prefix+f.Name)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs(p.Funcs, "")
	for _, typ := range p.Types {
		names = append(names, typ.Name)
		values(typ.Consts)
		values(typ.Vars)
		funcs(typ.Funcs, "")
		funcs(typ.Methods, typ.Name+".")
	}
	slices.Sort(names)
	return names
}

// TestOperationsStaysSmall keeps package operations to what every store and every plugin
// needs (the records, the Store contract with its validators and errors, Tracker and
// Resolver, StartRun and RequestCancel): at most 60 exported names, methods included.
// The Monitor (operations/monitor) and the itemoperations file codec (operations/opsfile)
// build on it in packages of their own.
func TestOperationsStaysSmall(t *testing.T) {
	const limit = 60
	names := exportedNames(t, "operations")
	require.LessOrEqual(t, len(names), limit, "package operations exports %d names, more than %d: what is not a record, the Store contract or a plugin's interface belongs in a package of its own\n%s",
		len(names), limit, strings.Join(names, "\n"))
}
