package itemops_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// veleroMainGoMod is the go.mod of the snapshot of Velero's main branch that the
// project's shared test data holds, next to the repository (../shared from its root).
// The module proxy does not serve main, so the tests that need main's go.mod read it
// there, and skip, saying so, when it is absent.
var veleroMainGoMod = filepath.Join("..", "shared", "velero-main", "go.mod")

// TestImportIntoVeleroForks holds the promise of docs/architecture.md "Dependency
// hygiene" against Velero's own module files: a fork of Velero v1.16.0, v1.17.2, v1.18.3
// or Velero's main branch that adds itemops keeps its go line and every k8s.io and
// controller-runtime version it selected. testdata/velero holds each release's go.mod as
// the Go module proxy serves it
// (https://proxy.golang.org/github.com/vmware-tanzu/velero/@v/<version>.mod); main's is
// read from the snapshot at ../shared/velero-main (see veleroMainGoMod), and its case
// is skipped when that is absent. For each, the test builds a program that imports
// every library package of itemops inside a module made of that go.mod, with itemops
// replaced by this tree, and compares the selected versions before and after. It needs
// the module proxy (or a module cache that already holds what those builds need).
func TestImportIntoVeleroForks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds inside four Velero module graphs; run without -short")
	}
	root, err := os.Getwd()
	require.NoError(t, err)
	type pkg struct{ ImportPath string }
	var imports strings.Builder
	for _, p := range goJSON[pkg](t, "list", "-json=ImportPath", "./...") {
		if strings.Contains(p.ImportPath, "/internal/") || strings.Contains(p.ImportPath, "/cmd/") {
			continue
		}
		fmt.Fprintf(&imports, "\t_ %q\n", p.ImportPath)
	}
	program := "package main\n\nimport (\n" + imports.String() + ")\n\nfunc main() {}\n"

	mods, err := filepath.Glob(filepath.Join("testdata", "velero", "*.go.mod"))
	require.NoError(t, err)
	require.Len(t, mods, 3)
	mods = append(mods, veleroMainGoMod)
	for _, mod := range mods {
		version := strings.TrimSuffix(filepath.Base(mod), ".go.mod")
		if mod == veleroMainGoMod {
			version = "main"
		}
		t.Run(version, func(t *testing.T) {
			data, err := os.ReadFile(mod)
			if mod == veleroMainGoMod && errors.Is(err, fs.ErrNotExist) {
				t.Skipf("Velero main's go.mod is read from %s (the shared snapshot next to the repository), which is absent", mod)
			}
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), data, 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd", "itemopsimport"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "itemopsimport", "main.go"), []byte(program), 0o644))

			before := forkSelection(t, dir)
			goIn(t, dir, "mod", "edit", "-require=github.com/itemops/itemops@v0.0.0", "-replace=github.com/itemops/itemops="+root)
			goIn(t, dir, "build", "-o", os.DevNull, "./cmd/itemopsimport")
			after := forkSelection(t, dir)
			if d := cmp.Diff(before, after); d != "" {
				t.Errorf("adding itemops to Velero %s's module moved its go line or k8s.io versions (-before +after):\n%s", version, d)
			}
		})
	}
}

// forkSelection returns the go line of the module in dir and the versions its go.mod
// requires of every k8s.io module and of controller-runtime. The go command keeps a
// module's go.mod listing the version it selects of every module that provides a
// package it builds, and raises the go line when a requirement needs it, so comparing
// go.mod before and after a build with -mod=mod compares what the build selected,
// without loading Velero's whole module graph.
func forkSelection(t *testing.T, dir string) map[string]string {
	t.Helper()
	type gomod struct {
		Go      string
		Require []struct{ Path, Version string }
	}
	mods := goJSONIn[gomod](t, dir, "mod", "edit", "-json")
	require.Len(t, mods, 1)
	sel := map[string]string{"go": mods[0].Go}
	for _, r := range mods[0].Require {
		if strings.HasPrefix(r.Path, "k8s.io/") || r.Path == "sigs.k8s.io/controller-runtime" {
			sel[r.Path] = r.Version
		}
	}
	require.Contains(t, sel, "k8s.io/apimachinery")
	return sel
}

// goIn runs the go command in dir, a module of its own that may update its go.sum, and
// fails the test with its output if it fails.
func goIn(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// Velero's go.sum is not in testdata: the scratch module records checksums as it
	// fetches modules, without the checksum database, which does not know Velero's
	// replacement modules.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, ee.Stderr)
	}
	require.NoError(t, err)
	return out
}
