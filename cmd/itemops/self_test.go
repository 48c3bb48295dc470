package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommandFor(t *testing.T) {
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	here, err := filepath.Abs(".")
	require.NoError(t, err)
	installed := filepath.Join(t.TempDir(), "itemops")
	require.NoError(t, os.WriteFile(installed, []byte("#!/bin/sh\n"), 0o755))
	other := filepath.Join(t.TempDir(), "itemops")
	require.NoError(t, os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755))
	goRun := "/tmp/go-build2841/b001/exe/itemops"
	onPath := func(p string) func(string) (string, error) {
		return func(name string) (string, error) {
			if name == "itemops" {
				return p, nil
			}
			return "", errors.New("not found")
		}
	}
	for _, tc := range []struct {
		name, exe, arg0, wd string
		lookPath            func(string) (string, error)
		want                string
	}{
		{"go run in the command's directory, as go -C cmd/itemops run . has it", goRun, goRun, here, onPath(""), "go -C cmd/itemops run ."},
		{"go run at the repository's root", goRun, goRun, repo, onPath(""), "itemops"},
		{"go run, from the build cache", "/root/.cache/go-build/e9/e931-d/itemops", "/root/.cache/go-build/e9/e931-d/itemops", here, onPath(""), "go -C cmd/itemops run ."},
		{"go run elsewhere", goRun, goRun, t.TempDir(), onPath(""), "itemops"},
		{"installed on PATH", installed, "itemops", repo, onPath(installed), "itemops"},
		{"started by path, another itemops on PATH", installed, installed, repo, onPath(other), installed},
		{"started by path, none on PATH", installed, "./bin/itemops", repo, onPath(""), "./bin/itemops"},
		{"a test binary is not go run's", "/tmp/go-build2841/b001/itemops.test", "/tmp/go-build2841/b001/itemops.test", repo, onPath(""), "/tmp/go-build2841/b001/itemops.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, commandFor(tc.exe, tc.arg0, tc.wd, tc.lookPath))
		})
	}
}

// TestGoRunLayout checks builtByGoRun against the toolchain: a program started by go run
// finds itself built by go run.
func TestGoRunLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\texe, _ := os.Executable()\n\tfmt.Print(exe)\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	cmd := exec.Command("go", "run", "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off")
	out, err := cmd.Output()
	require.NoError(t, err)
	require.True(t, builtByGoRun(string(out)), "go run's binary: %s", out)
	// A package of a module, which go run builds into its build cache from Go 1.24 on.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/self\n\ngo 1.23\n"), 0o644))
	cmd = exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	out, err = cmd.Output()
	require.NoError(t, err)
	require.True(t, builtByGoRun(string(out)), "go run's binary of a module's package: %s", out)
	exe, err := os.Executable()
	require.NoError(t, err)
	require.False(t, builtByGoRun(exe), "a test binary: %s", exe)
}

// testHintsRunAsPrinted runs the built command bin's demo, then each command its closing
// hints print, exactly as printed. TestEndToEnd calls it with the command it built.
func testHintsRunAsPrinted(t *testing.T, bin string) {
	db := filepath.Join(t.TempDir(), "itemops.db")
	res := runBinary(t, bin, "demo", "-db", db, "-items", "20", "-operations", "1", "-speed", "50")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	var hints []string
	for _, line := range strings.Split(res.stdout, "\n") {
		if _, cmd, ok := strings.Cut(line, ":  "); ok && strings.Contains(cmd, " inspect ") {
			hints = append(hints, strings.TrimSpace(cmd))
		}
	}
	require.NotEmpty(t, hints, "no hints in:\n%s", res.stdout)
	for _, h := range hints {
		args := strings.Fields(h)
		require.Equal(t, bin, args[0], "the binary is named by its path, as it is not on PATH")
		got := runBinary(t, args[0], args[1:]...)
		require.Equal(t, 0, got.code, "%s: %s", h, got.stderr)
	}
}
