package itemops_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goJSON runs the go command and decodes its stream of JSON values into a slice of T.
func goJSON[T any](t *testing.T, args ...string) []T {
	t.Helper()
	return goJSONInModule[T](t, "", args...)
}

// goJSONInModule is goJSON in the directory dir of this repository (a nested module's),
// with the go command's usual settings: unlike goIn, it never updates the module's files.
func goJSONInModule[T any](t *testing.T, dir string, args ...string) []T {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go %s (in %q): %v\n%s", strings.Join(args, " "), dir, err, ee.Stderr)
	}
	require.NoError(t, err)
	return decodeAll[T](t, out)
}

// modfileCopy copies the go.mod and go.sum of the module in dir to a temporary directory
// and returns the copy of go.mod, for the go command's -modfile flag.
func modfileCopy(t *testing.T, dir string) string {
	t.Helper()
	tmp := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name), b, 0o644))
	}
	return filepath.Join(tmp, "go.mod")
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

// TestDependencyHygiene keeps the promises of docs/architecture.md "Dependency hygiene":
// importing itemops must not move a Velero 1.16 fork's go line or any k8s.io version.
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
	require.True(t, goLine[0] == 1 && goLine[1] <= 23, "go line %s breaks the upper bound of 1.23: a Velero 1.16 fork is on go 1.23, and importing itemops must not raise it (docs/architecture.md \"Dependency hygiene\")", mods[0].Go)

	allowed := map[string]bool{
		"github.com/looplab/fsm":      true,
		"github.com/stretchr/testify": true,
		"github.com/google/go-cmp":    true,
		"k8s.io/apimachinery":         true,
		"go.etcd.io/bbolt":            true,
		"go.uber.org/goleak":          true, // tests only: catches leaked goroutines
		// errgroup bounds the Monitor's runs in flight. bbolt v1.4 already requires
		// this version, so naming it moves nothing in an importer's graph.
		"golang.org/x/sync": true,
		// Test support only (storage/faulttest, which no production package imports):
		// the linearizability checker of the fault harness. It has no dependencies of
		// its own and a go line of 1.16, so it moves nothing in an importer's graph.
		"github.com/anishathalye/porcupine": true,
	}
	for _, r := range mods[0].Require {
		if !r.Indirect {
			require.True(t, allowed[r.Path], "direct dependency %s is not allowed (docs/architecture.md \"Dependency hygiene\")", r.Path)
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
				"%s %s breaks the lower bound: the library must build on k8s.io v0.31.x, what a Velero 1.16 fork has (docs/architecture.md \"Dependency hygiene\"); code that needs a newer apimachinery cannot go in, and the newest versions are tested by .ci/run's matrix, not by raising go.mod", m.Path, m.Version)
		case m.Path == "go.etcd.io/bbolt":
			require.True(t, v[0] == 1 && v[1] == 4, "bbolt %s is not v1.4.x", m.Version)
		case m.Path == "github.com/looplab/fsm":
			require.Equal(t, "v1.0.3", m.Version)
		}
	}
}

// TestImportLayers keeps the one-way imports of the packages, as docs/architecture.md
// draws them: a package depends only on the itemops packages below it, directly or
// through others (an internal/ package does not launder an import). Its tests may import
// anything. The nested modules storage/etcdstore and storage/kubestore are held to the
// storage rule too. The test helpers under internal/testutil are test code: they may
// import what they test, and no package depends on them (TestTestHelpersOnlyInTests
// checks every file). An internal package below the root's internal/ that has a rule
// here is held to it, and only the packages its importers entry names may import it.
func TestImportLayers(t *testing.T) {
	// may lists, for each package (or prefix ending in "/"), every itemops package it may
	// depend on; the production internal/ packages may be used by anything.
	may := map[string][]string{
		// The production helpers are the bottom layer: they import the standard library
		// and each other, nothing else of itemops.
		"internal/": nil,
		// Leaves, and what builds on them alone.
		"phase":           nil,
		"clock":           nil,
		"restoreorder":    nil,
		"visible":         nil,
		"clock/clocktest": {"clock"},
		"progress":        {"clock"},
		// The records and the Store contract: what every store and plugin needs.
		"operations":                {"phase"},
		"operations/operationstest": {"operations", "phase"},
		"operations/decorate":       {"operations", "phase"},
		// On top of the records, never below them, and never on each other.
		"operations/opsfile": {"operations", "phase"},
		"operations/monitor": {"operations", "phase", "clock"},
		// The one definition of the Monitor's metrics, over its Observer, which every
		// exporter of them (prommetrics, integrations/otel) builds on.
		"operations/monitor/monitormetrics": {"operations", "operations/monitor", "phase", "clock"},
		"adapters":                          {"operations", "phase", "clock"},
		"adapters/adaptertest":              {"adapters", "operations", "phase", "clock"},
		// The storage engine and its drivers build on the records, not on the Monitor...
		"storage/": {"operations", "phase", "storage/kv"},
		// ...but for the conformance suite, whose cancel checks (RunCancel) drive a
		// Monitor on the store, with the scriptable trackers of operationstest.
		"storage/storetest": {"operations", "operations/monitor", "operations/operationstest", "phase", "clock"},
		// ...and for the fault harness, whose workload makes the passes of Monitors.
		"storage/faulttest": {"operations", "operations/monitor", "phase", "clock"},
		// The engine's record codec, shared by the engine and boltstore's migration.
		"storage/internal/record": {"operations", "phase"},
		// The engine's key layout, shared by the engine and the salvage of its records.
		"storage/internal/layout": {"operations", "phase"},
		// The salvage of a damaged store's records, which boltstore's Salvage reads with.
		"storage/internal/salvage": {"operations", "phase"},
		// The claim policy, which the drivers whose replicas share runs build on.
		"storage/claims": {"operations", "phase"},
		// The drivers whose replicas share runs (modules of their own) build on it.
		"storage/etcdstore": {"operations", "phase", "storage/kv", "storage/claims"},
		"storage/kubestore": {"operations", "phase", "storage/kv", "storage/claims"},
		// The web view reads any Store; it never imports a store, nor the Monitor.
		"webview": {"operations", "phase", "clock", "visible"},
	}
	// importers lists, for each internal package of a rule above, the only packages whose
	// non-test code may import it; Go would let any package beside its parent do so.
	importers := map[string][]string{
		"storage/internal/record":  {"storage/kv", "storage/boltstore", "storage/internal/layout", "storage/internal/salvage"},
		"storage/internal/layout":  {"storage/kv", "storage/internal/salvage"},
		"storage/internal/salvage": {"storage/boltstore"},
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
	}
	pkgs := goJSON[pkg](t, "list", "-json=ImportPath,Imports,Deps", "./...")
	// The nested module is listed through a copy of its go.mod with -mod=mod, so that
	// the listing works where the root module's requirements have moved (CI raises them
	// to the newest in a scratch copy) and never writes the module's own files.
	for _, nested := range []string{"storage/etcdstore", "storage/kubestore"} {
		pkgs = append(pkgs, goJSONInModule[pkg](t, nested,
			"list", "-mod=mod", "-modfile="+modfileCopy(t, nested), "-json=ImportPath,Imports,Deps", "./...")...)
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, mod+"/")
			if only, limited := importers[irel]; ok && limited {
				require.Contains(t, only, rel, "%s imports %s, which only %v may import (docs/architecture.md)", rel, irel, only)
			}
		}
		_, ruled := may[rel]
		if rel == "" || strings.HasPrefix(rel, "cmd/") || isTestHelper(rel) || (strings.Contains(rel, "/internal/") && !ruled) || strings.HasPrefix(rel, "examples/") {
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
		require.True(t, found, "package %s has no place in the layering; add it to TestImportLayers and docs/architecture.md", rel)
		var against []string
		for _, dep := range p.Deps {
			drel, ok := strings.CutPrefix(dep, mod+"/")
			if ok && !isInternal(drel) && !slices.Contains(allowed, drel) {
				against = append(against, drel)
			}
		}
		require.Empty(t, against, "%s depends on these, against the layering (docs/architecture.md)", rel)
	}
}

// mod is the root module's path.
const mod = "github.com/itemops/itemops"

// testHelpers is the directory, relative to the module root, of the test helpers: the
// internal packages that only _test.go files may import.
const testHelpers = "internal/testutil/"

// isInternal reports whether the package at rel, relative to the module root, is an
// internal package that production code may use (internal/..., but for the test
// helpers, or an internal/ directory of a package below).
func isInternal(rel string) bool {
	return (strings.HasPrefix(rel, "internal/") && !isTestHelper(rel)) || strings.Contains(rel, "/internal/")
}

// isTestHelper reports whether the package at rel, relative to the module root, is one
// of the test helpers under internal/testutil.
func isTestHelper(rel string) bool {
	return strings.HasPrefix(rel, testHelpers)
}

// TestTestHelpersOnlyInTests keeps the test helpers apart from production code: no
// non-test Go file of the repository, of any module and under any build constraint,
// imports a package under internal/testutil, except the files of the test helpers
// themselves; and no non-test file of the root's other internal/ packages imports
// package testing, since a package that does is a test helper and belongs under
// internal/testutil.
func TestTestHelpersOnlyInTests(t *testing.T) {
	var found []string
	files := parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		path = filepath.ToSlash(path)
		if strings.HasPrefix(path, testHelpers) {
			return
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if rel, ok := strings.CutPrefix(p, mod+"/"); ok && isTestHelper(rel) {
				found = append(found, fmt.Sprintf("%s: imports %s", fset.Position(imp.Pos()), p))
			}
			if p == "testing" && strings.HasPrefix(path, "internal/") {
				found = append(found, fmt.Sprintf("%s: imports testing outside %s", fset.Position(imp.Pos()), testHelpers))
			}
		}
	})
	require.Greater(t, files, 100, "non-test Go files parsed")
	require.Empty(t, found, "test helpers mixed with production code (docs/architecture.md)")
}

// TestNestedModulesUsePublicAPI keeps the nested modules publishable
// (docs/contributing.md "Releases"): no non-test file of a nested module imports an
// internal package of another module of the repository. Go allows it, since the import
// path lies under the root's, but such a package is no API: a published module resting
// on it could break at any version of the root.
func TestNestedModulesUsePublicAPI(t *testing.T) {
	var found []string
	files := parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		own := moduleOf(t, filepath.Dir(path))
		if own == "." {
			return
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			rel, ok := strings.CutPrefix(p, mod+"/")
			if !ok || !(strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/")) {
				continue
			}
			if rel != own && !strings.HasPrefix(rel, own+"/") {
				found = append(found, fmt.Sprintf("%s: imports %s, internal to another module", fset.Position(imp.Pos()), p))
			}
		}
	})
	require.Greater(t, files, 100, "non-test Go files parsed")
	require.Empty(t, found, "nested modules resting on another module's internal packages")
}

// moduleOf returns the directory, relative to the repository's root, of the module that
// holds dir: the nearest directory at or above it with a go.mod ("." for the root).
func moduleOf(t *testing.T, dir string) string {
	t.Helper()
	for d := filepath.ToSlash(dir); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return "."
}

// parseSources parses every non-test Go file of the repository, with its comments, of
// every module (outside testdata, vendor and hidden directories), calls fn with each, and
// returns how many it parsed. A file that does not parse fails the test.
func parseSources(t *testing.T, fn func(path string, fset *token.FileSet, f *ast.File)) int {
	t.Helper()
	files := 0
	walkRepository(t, func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(path, fset, f)
		return nil
	})
	return files
}

// walkRepository calls fn with the path of every file of the repository, of every
// module, outside testdata, vendor and hidden directories. An error of fn or of the walk
// fails the test.
func walkRepository(t *testing.T, fn func(path string) error) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(path)
	})
	require.NoError(t, err)
}

// TestNoGoroutineIdentity keeps a rule of docs/architecture.md "Concurrency": no code of
// itemops tells goroutines apart, by their stacks or otherwise, so that what a call does
// never depends on which function called it. It parses every non-test Go file of the
// repository, of every module, and fails on each call of runtime.Caller, Callers,
// CallersFrames or Stack.
func TestNoGoroutineIdentity(t *testing.T) {
	banned := map[string]bool{"Caller": true, "Callers": true, "CallersFrames": true, "Stack": true}
	var found []string
	files := parseSources(t, func(path string, fset *token.FileSet, f *ast.File) {
		local := "" // the name the file gives package runtime
		for _, imp := range f.Imports {
			if imp.Path.Value == `"runtime"` {
				local = "runtime"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" || local == "_" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && banned[sel.Sel.Name] {
				found = append(found, fmt.Sprintf("%s: runtime.%s", fset.Position(sel.Pos()), sel.Sel.Name))
			}
			return true
		})
	})
	require.Greater(t, files, 100, "non-test Go files parsed")
	require.Empty(t, found, "code that reads goroutine stacks (docs/architecture.md \"Concurrency\")")
}
