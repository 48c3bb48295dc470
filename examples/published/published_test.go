// Package published_test checks that the nested modules can be published: a module
// outside the repository that depends on them at a commit, with no replace, builds.
package published_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/itemops/itemops/internal/testutil/racebuild"
)

// mod is the root module's path.
const mod = "github.com/itemops/itemops"

// TestDependOnNestedModules is a user's module that depends on storage/kubestore,
// integrations/controllerruntime, storage/etcdstore and integrations/otel at the
// repository's HEAD, as
// `go get <module>@<commit>` would record them, with no replace: go mod tidy and go build
// must succeed through a module proxy that serves what GitHub would serve of the
// repository's history (a file-based GOPROXY made here with git, in front of the
// machine's own for the other modules).
//
// What the nested modules' go.mod files require of the repository's modules (written by
// .ci/pin) must therefore name versions that exist (a tag, or the pseudo-version of a
// commit of the history, with the commit's time), and the root at that version must hold
// all that the nested modules at HEAD use. It needs the module proxy (or a module cache
// that holds what the nested modules need) and the repository's git history.
func TestDependOnNestedModules(t *testing.T) {
	repo := strings.TrimSpace(git(t, "", "rev-parse", "--show-toplevel"))
	p := &proxy{t: t, repo: repo, dir: t.TempDir(), served: map[module.Version]bool{}}
	head := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))
	var requires []string
	imports := map[string]string{ // a function of each, so that the program uses them
		"storage/kubestore":              "kubestore.Open",
		"integrations/controllerruntime": "controllerruntime.New",
		"storage/etcdstore":              "etcdstore.Open",
		"integrations/otel":              "otel.Options",
	}
	var program strings.Builder
	program.WriteString("package main\n\nimport (\n")
	var uses []string
	for dir, use := range imports {
		v := p.pseudoVersion(dir, head)
		p.serve(dir, v, head)
		requires = append(requires, fmt.Sprintf("\t%s/%s %s\n", mod, dir, v))
		fmt.Fprintf(&program, "\t%q\n", mod+"/"+dir)
		uses = append(uses, "\t_ = "+use+"\n")
	}
	program.WriteString(")\n\nfunc main() {\n" + strings.Join(uses, "") + "}\n")

	// The user's other requirements are the examples' (the newest controller-runtime,
	// client-go and Prometheus client), so that the build reuses the packages that the
	// examples' own build compiled, with the same flags (racebuild), and compiles only
	// itemops's.
	examples, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	f, err := modfile.ParseLax("go.mod", examples, nil)
	require.NoError(t, err)
	for _, r := range f.Require {
		if _, ours := dirOf(r.Mod.Path); !ours {
			requires = append(requires, fmt.Sprintf("\t%s %s\n", r.Mod.Path, r.Mod.Version))
		}
	}
	user := t.TempDir()
	gomod := "module example.com/user\n\ngo " + f.Go.Version + "\n\nrequire (\n" + strings.Join(requires, "") + ")\n"
	require.NoError(t, os.WriteFile(filepath.Join(user, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(user, "main.go"), []byte(program.String()), 0o644))
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(p.dir)+","+strings.TrimSpace(goOut(t, "", nil, "env", "GOPROXY")),
		"GONOSUMDB="+mod, "GOPRIVATE=", "GONOPROXY=", "GOFLAGS=-mod=mod", "GOWORK=off")
	goOut(t, user, env, "mod", "tidy")
	goOut(t, user, env, append(append([]string{"build"}, racebuild.Flags()...), "-o", os.DevNull, ".")...)

	// integrations/velero, the last published module, is served too, so that its
	// requirements are checked as the others' were; its build, on Velero's large
	// graph, is .ci/velero's.
	p.serve("integrations/velero", p.pseudoVersion("integrations/velero", head), head)

	// The root the user's build chose: the newest that the nested modules require, from
	// the proxy, not a directory.
	var root struct {
		Version string
		Replace *struct{ Path string }
	}
	require.NoError(t, json.Unmarshal([]byte(goOut(t, user, env, "list", "-m", "-json", mod)), &root))
	require.Nil(t, root.Replace, "the user's module replaces the root")
	require.True(t, p.served[module.Version{Path: mod, Version: root.Version}],
		"the build chose the root at %s, which the proxy of the repository does not serve", root.Version)
	tidied, err := os.ReadFile(filepath.Join(user, "go.mod"))
	require.NoError(t, err)
	f, err = modfile.ParseLax("go.mod", tidied, nil)
	require.NoError(t, err)
	require.Empty(t, f.Replace, "the user's go.mod holds a replace")
}

// TestPin runs .ci/pin in a clone of the repository's HEAD, as docs/contributing.md "Releases"
// has a maintainer run it: with a release's version (v0 or v1), every requirement of a nested
// module on the repository's modules names that version; without one, it commits once per
// link of the longest chain of requirements among the modules (three: cmd/itemops and
// examples require storage/kubestore, which requires integrations/controllerruntime, which
// requires the root), and the last commit's go.mod files name the pseudo-version of the
// commit before it as the go command computes it.
func TestPin(t *testing.T) {
	repo := strings.TrimSpace(git(t, "", "rev-parse", "--show-toplevel"))
	clone := filepath.Join(t.TempDir(), "itemops")
	git(t, "", "clone", "--quiet", repo, clone)
	for _, kv := range [][2]string{{"user.name", "pin test"}, {"user.email", "pin@localhost"}} {
		git(t, clone, "config", kv[0], kv[1])
	}
	// A major version of 2 or more would need /v2 module paths: refused, nothing written.
	out, err := exec.Command(filepath.Join(clone, ".ci", "pin"), "v2.0.0").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Empty(t, git(t, clone, "status", "--porcelain"), ".ci/pin v2.0.0 changed the tree")
	out, err = exec.Command(filepath.Join(clone, ".ci", "pin"), "v0.8.7").CombinedOutput()
	require.NoError(t, err, "%s", out)
	requirements(t, clone, func(gomod string, r *modfile.Require) {
		require.Equal(t, "v0.8.7", r.Mod.Version, "%s requires %s", gomod, r.Mod.Path)
	})
	git(t, clone, "checkout", "--quiet", "--", ".")

	p := &proxy{t: t, repo: clone}
	first := strings.TrimSpace(git(t, clone, "rev-parse", "HEAD"))
	out, err = exec.Command(filepath.Join(clone, ".ci", "pin")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	second := strings.TrimSpace(git(t, clone, "rev-parse", "HEAD~1"))
	require.Equal(t, first, strings.TrimSpace(git(t, clone, "rev-parse", "HEAD~3")), ".ci/pin made three commits, one per link of the longest chain")
	require.Contains(t, git(t, clone, "log", "-1", "--format=%s"), "round 3 of 3")
	requirements(t, clone, func(gomod string, r *modfile.Require) {
		dir, _ := dirOf(r.Mod.Path)
		require.Equal(t, p.pseudoVersion(dir, second), r.Mod.Version, "%s requires %s", gomod, r.Mod.Path)
	})
}

// requirements calls f with each requirement on a module of the repository of every
// nested module's go.mod in the checkout at dir.
func requirements(t *testing.T, dir string, f func(gomod string, r *modfile.Require)) {
	t.Helper()
	seen := 0
	for _, gomod := range strings.Fields(git(t, dir, "ls-files", "*/go.mod")) {
		data, err := os.ReadFile(filepath.Join(dir, gomod))
		require.NoError(t, err)
		mf, err := modfile.ParseLax(gomod, data, nil)
		require.NoError(t, err)
		for _, r := range mf.Require {
			if _, ours := dirOf(r.Mod.Path); ours {
				f(gomod, r)
				seen++
			}
		}
	}
	require.NotZero(t, seen, "no requirement on the repository's modules")
}

// A proxy is a directory laid out as a GOPROXY (the go command's module proxy protocol,
// served from files) that holds modules of the repository at versions of its history.
type proxy struct {
	t      *testing.T
	repo   string
	dir    string
	served map[module.Version]bool
}

// serve adds the module in directory dir of the repository ("." for the root), at
// revision rev, as version v, and then what its go.mod requires of the repository's
// modules, each at the version it names, which must exist in the history.
func (p *proxy) serve(dir, v, rev string) {
	t := p.t
	m := module.Version{Path: modulePath(dir), Version: v}
	if p.served[m] {
		return
	}
	p.served[m] = true
	sub := ""
	if dir != "." {
		sub = dir
	}
	gomod := git(t, p.repo, "show", rev+":"+path.Join(sub, "go.mod"))
	escaped, err := module.EscapePath(m.Path)
	require.NoError(t, err)
	at := filepath.Join(p.dir, filepath.FromSlash(escaped), "@v")
	require.NoError(t, os.MkdirAll(at, 0o755))
	var zipped bytes.Buffer
	require.NoError(t, modzip.CreateFromVCS(&zipped, m, p.repo, rev, sub), "zip of %s", m)
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, p.commitTime(rev)})
	require.NoError(t, err)
	for name, data := range map[string][]byte{v + ".mod": []byte(gomod), v + ".zip": zipped.Bytes(), v + ".info": info} {
		require.NoError(t, os.WriteFile(filepath.Join(at, name), data, 0o644))
	}
	list, err := os.OpenFile(filepath.Join(at, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = fmt.Fprintln(list, v)
	require.NoError(t, errors.Join(err, list.Close()))
	checkZip(t, zipped.Bytes(), m)

	f, err := modfile.ParseLax("go.mod", []byte(gomod), nil)
	require.NoError(t, err)
	for _, r := range f.Require {
		depDir, ok := dirOf(r.Mod.Path)
		if !ok {
			continue
		}
		p.serve(depDir, r.Mod.Version, p.revisionOf(m, r.Mod))
	}
}

// revisionOf returns the commit of the repository that version dep.Version of module
// dep.Path names, as the go command would find it on GitHub: the tag <dir>/<version> of a
// release, or the commit of a pseudo-version, whose time must be the commit's. It fails
// the test, naming by, when there is none.
func (p *proxy) revisionOf(by, dep module.Version) string {
	t := p.t
	fix := fmt.Sprintf("%s requires %s: run .ci/pin after committing what it needs (docs/contributing.md \"Releases\")", by, dep)
	if !module.IsPseudoVersion(dep.Version) {
		tag := dep.Version
		if dir, _ := dirOf(dep.Path); dir != "." {
			tag = dir + "/" + tag
		}
		out, err := exec.Command("git", "-C", p.repo, "rev-parse", "--verify", "--quiet", tag+"^{commit}").Output()
		require.NoError(t, err, "%s: the repository has no tag %s", fix, tag)
		return strings.TrimSpace(string(out))
	}
	short, err := module.PseudoVersionRev(dep.Version)
	require.NoError(t, err)
	out, err := exec.Command("git", "-C", p.repo, "rev-parse", "--verify", "--quiet", short+"^{commit}").Output()
	require.NoError(t, err, "%s: the repository's history holds no commit %s (a shallow clone cannot tell)", fix, short)
	rev := strings.TrimSpace(string(out))
	at, err := module.PseudoVersionTime(dep.Version)
	require.NoError(t, err)
	require.True(t, at.Equal(p.commitTime(rev)), "%s: the version's time is not the commit's (%s)", fix, p.commitTime(rev))
	return rev
}

// pseudoVersion returns the version the go command gives the module in dir at commit
// rev: a pseudo-version after the module's newest release tag below rev, if any.
func (p *proxy) pseudoVersion(dir, rev string) string {
	match := "v[0-9]*.[0-9]*.[0-9]*"
	if dir != "." {
		match = dir + "/" + match
	}
	older := ""
	if out, err := exec.Command("git", "-C", p.repo, "describe", "--tags", "--abbrev=0", "--match", match, rev).Output(); err == nil {
		older = path.Base(strings.TrimSpace(string(out)))
	}
	return module.PseudoVersion("", older, p.commitTime(rev), rev[:12])
}

// commitTime returns the committer time of rev, as a pseudo-version holds it.
func (p *proxy) commitTime(rev string) time.Time {
	s := strings.TrimSpace(git(p.t, p.repo, "show", "-s", "--format=%ct", rev))
	sec, err := strconv.ParseInt(s, 10, 64)
	require.NoError(p.t, err)
	return time.Unix(sec, 0).UTC()
}

// checkZip fails the test when the zip of m holds a file of a module nested in it: the
// go command leaves the nested modules out, and so must what GitHub would serve.
func checkZip(t *testing.T, data []byte, m module.Version) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	require.NotEmpty(t, zr.File, "the zip of %s is empty", m)
	prefix := m.Path + "@" + m.Version + "/"
	for _, f := range zr.File {
		name := strings.TrimPrefix(f.Name, prefix)
		require.False(t, name != "go.mod" && path.Base(name) == "go.mod", "the zip of %s holds %s", m, f.Name)
	}
}

// modulePath returns the path of the module in directory dir of the repository.
func modulePath(dir string) string {
	if dir == "." {
		return mod
	}
	return mod + "/" + dir
}

// dirOf returns the directory in the repository of the module of path p, and whether p
// is a module of the repository.
func dirOf(p string) (string, bool) {
	if p == mod {
		return ".", true
	}
	dir, ok := strings.CutPrefix(p, mod+"/")
	return dir, ok
}

// git runs git in dir and returns its output, failing the test with its errors.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	out, err := exec.Command("git", args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, exit.Stderr)
	}
	require.NoError(t, err)
	return string(out)
}

// goOut runs the go command in dir with env (the process's when nil) and returns its
// standard output, failing the test with its errors.
func goOut(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), stderr.String())
	return string(out)
}
