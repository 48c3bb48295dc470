package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/racebuild"
)

// TestGuideCodeBlocks holds the Go blocks of docs/operators.md to this package: each must
// appear, verbatim, in its sources, which the build compiles and the tests run.
func TestGuideCodeBlocks(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		require.Contains(t, src.String(), b[1], "a code block of docs/operators.md is not in examples/operator")
	}
}

// TestGuideShellBlocks runs the shell blocks of docs/operators.md as a reader would. Those
// of "1. A module" run in an empty directory beside a checkout of this repository (this
// one, linked as ../itemops); then this package's sources, and the CRD manifest under
// config that cluster.go embeds, are copied into the module they made, which takes the versions of the examples module, and go mod tidy, go build and go
// test must pass there, as the guide says. A shell block in any other section fails
// the test, which would not know where to run it; the command of "10. On a cluster",
// which needs a cluster, is in a block that is not run, and must be main's. It needs the module proxy, or a module
// cache holding what the operator needs.
func TestGuideShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests an operator's module; run without -short")
	}
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(root, filepath.Join(dir, "itemops")))
	where := map[string]string{"## 1. A module": dir}
	scripts := map[string]string{}
	section := ""
	for _, part := range regexp.MustCompile("(?ms)^(## [^\n]*)$|^```sh\n(.*?)^```").FindAllStringSubmatch(string(guide), -1) {
		if part[1] != "" {
			section = part[1]
			continue
		}
		_, ok := where[section]
		require.True(t, ok, "docs/operators.md has a shell block under %q, which this test does not run", section)
		scripts[section] += part[2]
	}
	require.Len(t, scripts, len(where), "a section of docs/operators.md that this test runs has lost its shell blocks")

	shell(t, dir, scripts["## 1. A module"])
	module := filepath.Join(dir, "appbackup")
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if f == "guide_test.go" { // reads the guide by its path in this repository
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(module, f), b, 0o644))
	}
	require.NoError(t, os.CopyFS(filepath.Join(module, "config"), os.DirFS("config")), "the CRD that cluster.go embeds")
	// The module takes the versions the examples module selects, so that its build reuses
	// the packages the examples' own build left in the cache; the guide's go mod tidy then
	// adds nothing newer, since the examples module is tidy.
	var examples struct {
		Require []struct{ Path, Version string }
	}
	require.NoError(t, json.Unmarshal([]byte(shell(t, "..", "go mod edit -json")), &examples))
	pin := "go mod edit"
	for _, r := range examples.Require {
		if !strings.HasPrefix(r.Path, "github.com/itemops/") {
			pin += " -require=" + r.Path + "@" + r.Version
		}
	}
	flags := strings.Join(racebuild.Flags(), " ") // built as this test was, to reuse its packages
	shell(t, module, pin+"\ngo mod tidy\ngo build "+flags+" ./...\ngo test "+flags+" ./...\n")

	// "10. On a cluster" gives the command that runs main on a cluster, which needs one:
	// it must be the command of main's package comment, whose path TestClusterExample
	// runs on the test API server.
	mainDoc, err := os.ReadFile("main.go")
	require.NoError(t, err)
	const command = "go run ./operator -cluster -kubeconfig ~/.kube/config"
	require.Contains(t, string(mainDoc), "//\t"+command+"\n", "main's package comment")
	require.Contains(t, string(guide), "\n"+command+"\n", "docs/operators.md, 10. On a cluster")
}

// shell runs script with bash in dir, stopping at the first command that fails, and
// fails the test with its output then; it returns the output.
func shell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(racebuild.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "in %s:\n%s\n%s", dir, script, out)
	return string(out)
}
