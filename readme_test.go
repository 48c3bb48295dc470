package itemops_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMERecipes runs the README's recipe for building on a local checkout as its
// reader would, once for each row of its table of nested modules: in a new module that
// imports the nested module, the recipe's block (the checkout's path and its list of
// modules filled in from the row) makes go mod tidy succeed, and every package the
// program needs resolves. The table must name every nested module of the repository
// but the examples, webview/browsertest and cmd/itemops (which hold programs and tests
// that nobody imports), and its "replace also" the nested modules that each one's go.mod
// requires. It needs the module proxy (or a module cache that holds what the nested
// modules need).
func TestREADMERecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies a module for each nested module; run without -short")
	}
	root, err := os.Getwd()
	require.NoError(t, err)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)

	head := "| you import | replace also |\n|---|---|\n"
	at := strings.Index(string(readme), head)
	require.GreaterOrEqual(t, at, 0, "no table of nested modules in the README")
	body, _, _ := strings.Cut(string(readme)[at+len(head):], "\n\n")
	rows := regexp.MustCompile("(?m)^\\| `([a-z/]+)` \\|(.*)\\|$").FindAllStringSubmatch(body, -1)
	table := map[string][]string{}
	for _, r := range rows {
		table[r[1]] = regexp.MustCompile("`([a-z/]+)`").FindAllString(r[2], -1)
		for i, m := range table[r[1]] {
			table[r[1]][i] = strings.Trim(m, "`")
		}
	}
	nested := nestedModules(t, root)
	require.Equal(t, keys(nested), keys(table), "the README's table of nested modules")
	for m, also := range table {
		require.ElementsMatch(t, nested[m], also, "the README's \"replace also\" of %s: the nested modules its go.mod requires", m)
	}

	block := regexp.MustCompile("(?s)```sh\n(itemops=/path/to/itemops\n.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "no block of the recipe for a local checkout in the README")
	list := regexp.MustCompile(`for m in ([a-z/ ]+); do`)
	require.True(t, list.Match(block[1]), "the recipe has no loop over the modules")

	for m, also := range table {
		t.Run(m, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/user\n\ngo 1.23.0\n"), 0o644))
			program := "package main\n\nimport _ \"github.com/itemops/itemops/" + m + "\"\n\nfunc main() {}\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644))
			script := strings.Replace(string(block[1]), "/path/to/itemops", root, 1)
			script = list.ReplaceAllLiteralString(script, "for m in "+strings.Join(append([]string{m}, also...), " ")+"; do")
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the README's recipe for %s:\n%s", m, out)
			goIn(t, dir, "list", "-deps", ".")
		})
	}
}

// nestedModules returns the modules nested in the repository at root but the
// examples, webview/browsertest and cmd/itemops, by their directories, each with the nested modules its go.mod requires.
func nestedModules(t *testing.T, root string) map[string][]string {
	t.Helper()
	mods := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || path == filepath.Join(root, "go.mod") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil || rel == "examples" || filepath.ToSlash(rel) == "webview/browsertest" || filepath.ToSlash(rel) == "cmd/itemops" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var req []string
		for _, m := range regexp.MustCompile(`(?m)^\s*github\.com/itemops/itemops/(\S+) v`).FindAllStringSubmatch(string(data), -1) {
			req = append(req, m[1])
		}
		mods[filepath.ToSlash(rel)] = req
		return nil
	})
	require.NoError(t, err)
	return mods
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestREADMECommandsInCI checks that .ci/run runs the README's two first commands: the
// demo (with flags of its own) and the test command, word for word.
func TestREADMECommandsInCI(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	ci, err := os.ReadFile(".ci/run")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "no command block in the README")
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	require.Len(t, cmds, 2, "the README's first block: the demo's command and the tests'")
	require.Equal(t, "go -C cmd/itemops run . demo", cmds[0])
	require.Contains(t, cmds[1], "go test ")
	require.True(t, slices.Contains(strings.Split(string(ci), "\n"), cmds[1]), ".ci/run has no line that is the README's test command, %q", cmds[1])
	require.True(t, strings.Contains(string(ci), cmds[0]), ".ci/run does not run the README's demo, %q", cmds[0])
}
