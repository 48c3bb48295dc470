package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// selfCommand returns the command that runs this program again, as a user can type it:
// "go -C cmd/itemops run ." when the program was started by go run in its directory,
// else the program's name when a PATH lookup of it finds this executable, else the path
// it was started with.
func selfCommand() string {
	exe, _ := os.Executable()
	wd, _ := os.Getwd()
	return commandFor(exe, os.Args[0], wd, exec.LookPath)
}

// commandFor is selfCommand for the executable exe started as arg0 in directory wd, with
// lookPath resolving a name on PATH.
func commandFor(exe, arg0, wd string, lookPath func(string) (string, error)) string {
	if builtByGoRun(exe) {
		// The command is a module of its own: go run works in its directory, which the
		// README's commands reach from the repository's root with go's -C flag.
		if gomod, err := os.ReadFile(filepath.Join(wd, "go.mod")); err == nil && strings.HasPrefix(string(gomod), "module github.com/itemops/itemops/cmd/itemops\n") {
			return "go -C cmd/itemops run ."
		}
		// go run pkg@version refuses the module (its replace directives): the binary
		// came from some other build, and its name is the best guess.
		return "itemops"
	}
	name := filepath.Base(arg0)
	if found, err := lookPath(name); err == nil && sameFile(found, exe) {
		return name
	}
	if strings.Contains(arg0, " ") {
		return `"` + arg0 + `"`
	}
	return arg0
}

// builtByGoRun reports whether exe is a binary go run built: go run links into
// "exe/<name>" under a temporary go-build directory, which it removes afterwards, or,
// from Go 1.24 on, for a package of a module, keeps the binary in its build cache (by
// default a go-build directory) as "<2 hex digits>/<hash>-d/<name>".
func builtByGoRun(exe string) bool {
	dir := filepath.Dir(exe)
	base := filepath.Base(dir)
	cached := strings.HasSuffix(base, "-d") && len(filepath.Base(filepath.Dir(dir))) == 2
	if base != "exe" && !cached {
		return false
	}
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(d), "go-build") {
			return true
		}
	}
	return false
}

// sameFile reports whether paths a and b name one file.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
