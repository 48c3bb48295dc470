package apiservertest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// libraryModule is the module path that marks the root of a checkout of this repository.
const libraryModule = "github.com/itemops/itemops"

// etcdModule is the module whose root package is etcd's server command.
const etcdModule = "go.etcd.io/etcd/server/v3"

// binaries are the paths of the two programs envtest starts.
type binaries struct {
	apiServer, etcd string
}

// directory returns a new directory in which envtest finds b as kube-apiserver and
// etcd, through launchers that [writeLauncher] writes; the caller removes it after use.
func (b binaries) directory() (string, error) {
	dir, err := os.MkdirTemp("", "apiservertest-")
	if err != nil {
		return "", fmt.Errorf("make a directory of kube-apiserver and etcd for envtest: %w", err)
	}
	err = errors.Join(writeLauncher(filepath.Join(dir, "kube-apiserver"), b.apiServer), writeLauncher(filepath.Join(dir, "etcd"), b.etcd))
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("make a directory of kube-apiserver and etcd for envtest: %w", err)
	}
	return dir, nil
}

// findBinaries looks for kube-apiserver and etcd as the package comment says. It returns
// a *missingError when they are not there to be found, and another error when they are
// but cannot be used (an archive whose checksum is wrong, a cache directory it cannot
// write, an etcd in KUBEBUILDER_ASSETS older than 3.5).
func findBinaries() (binaries, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		b := binaries{apiServer: filepath.Join(dir, "kube-apiserver"), etcd: filepath.Join(dir, "etcd")}
		for _, path := range []string{b.apiServer, b.etcd} {
			if _, err := os.Stat(path); err != nil {
				return binaries{}, &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS=%s: %v", dir, err)}
			}
		}
		if err := checkEtcd(b.etcd); err != nil {
			return binaries{}, fmt.Errorf("KUBEBUILDER_ASSETS=%s: %w", dir, err)
		}
		return b, nil
	}
	root, err := checkoutRoot()
	if err != nil {
		return binaries{}, &missingError{looked: "KUBEBUILDER_ASSETS is not set, and " + err.Error()}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "itemops-apiservertest")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return binaries{}, fmt.Errorf("make the cache of kube-apiserver and etcd: %w", err)
	}
	var b binaries
	if b.apiServer, err = unpackAPIServer(filepath.Join(filepath.Dir(root), "shared", "kube"), cache); err != nil {
		return binaries{}, err
	}
	if b.etcd, err = findEtcd(root, cache); err != nil {
		return binaries{}, err
	}
	return b, nil
}

// checkoutRoot returns the nearest directory, from the working directory up, whose
// go.mod declares the library's module.
func checkoutRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if modulePath(filepath.Join(dir, "go.mod")) == libraryModule {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%s is not inside a checkout of %s", wd, libraryModule)
		}
	}
}

// modulePath returns the module path that the go.mod file at path declares, or "" when
// there is no such file or it declares none.
func modulePath(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// unpackAPIServer returns the path of kube-apiserver in cache, unpacking it first from
// kube-apiserver.xz in kube when the cache lacks it. The unpacked binary must have the
// checksum that kube's SHA256SUMS gives it; it is written under a temporary name and
// renamed, so that a run that dies midway leaves no partial binary behind.
func unpackAPIServer(kube, cache string) (string, error) {
	archive := filepath.Join(kube, "kube-apiserver.xz")
	if _, err := os.Stat(archive); err != nil {
		return "", &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS is not set, and %v", err)}
	}
	want, err := checksum(filepath.Join(kube, "SHA256SUMS"), "kube-apiserver")
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, "kube-apiserver-"+want[:16])
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	xz, err := exec.LookPath("xz")
	if err != nil {
		return "", &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS is not set, and %s needs xz to unpack: %v", archive, err)}
	}
	tmp, err := os.CreateTemp(cache, "kube-apiserver-*.tmp")
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w", archive, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	sum := sha256.New()
	var stderr bytes.Buffer
	cmd := exec.Command(xz, "-dc", archive)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(tmp, sum), &stderr
	runErr := cmd.Run()
	if err := errors.Join(runErr, tmp.Chmod(0o755), tmp.Close()); err != nil {
		return "", fmt.Errorf("unpack %s: %w: %s", archive, err, stderr.Bytes())
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return "", fmt.Errorf("unpack %s: kube-apiserver has SHA-256 %s, SHA256SUMS says %s", archive, got, want)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("unpack %s: %w", archive, err)
	}
	return path, nil
}

// checksum returns the SHA-256 that the sums file at path gives to name, in the
// format of sha256sum's output.
func checksum(path, name string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS is not set, and %v", err)}
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == name && len(fields[0]) == sha256.Size*2 {
			return fields[0], nil
		}
	}
	if err := lines.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "", fmt.Errorf("%s gives no SHA-256 for %s", path, name)
}

// findEtcd returns the path of an etcd that kube-apiserver can use, 3.5 or later, for
// a checkout whose root is root: the one that storage/etcdstore/go.mod pins, built in
// cache, else the one on PATH, as [chooseEtcd] prefers them. It returns a *missingError
// when no such etcd can be had, and another error when the pin cannot be read.
func findEtcd(root, cache string) (string, error) {
	pins := filepath.Join(root, "storage", "etcdstore", "go.mod")
	version, err := requiredVersion(pins, etcdModule)
	if err != nil {
		return "", err
	}
	built := filepath.Join(cache, "etcd-"+version)
	return chooseEtcd(version, built, func() error { return buildEtcd(version, cache, built) })
}

// chooseEtcd returns the path of the etcd to start, preferring the version that the
// repository pins, and an etcd older than [minEtcd] never. In order it takes the etcd
// at built, when there is one; the one on PATH, when it is the pinned version; the one
// that build makes at built; and last the one on PATH when it is [minEtcd] or later.
// When none fits it returns a *missingError that says what it found and what to do.
func chooseEtcd(version, built string, build func() error) (string, error) {
	if _, err := os.Stat(built); err == nil {
		if err := checkEtcd(built); err != nil {
			return "", fmt.Errorf("%w; remove it to build it again", err)
		}
		return built, nil
	}
	onPath, lookErr := exec.LookPath("etcd")
	var pathErr error // why the etcd on PATH cannot be used, when there is one
	if lookErr == nil {
		got, err := etcdVersion(onPath)
		switch {
		case err != nil:
			pathErr = err
		case "v"+got.String() == version:
			return onPath, nil
		case !got.atLeast(minEtcd):
			pathErr = tooOld(onPath, got)
		}
	}
	buildErr := build()
	if buildErr == nil {
		if err := checkEtcd(built); err != nil {
			return "", err
		}
		return built, nil
	}
	if lookErr == nil && pathErr == nil {
		return onPath, nil
	}
	found := "no etcd is on PATH"
	if lookErr == nil {
		found = "the etcd on PATH cannot be used: " + pathErr.Error()
	}
	return "", &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS is not set, %s, and %v", found, buildErr)}
}

// buildEtcd builds etcd's server command at version with the go command, into a
// temporary module under cache, and renames it to path. It fails when the go command
// does, most often for want of the Go module proxy, with the command's output.
func buildEtcd(version, cache, path string) error {
	// A module of its own requires etcd's server module, whose go.mod holds replace
	// directives that go install pkg@version refuses.
	mod, err := os.MkdirTemp(cache, "etcd-build-*")
	if err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	defer os.RemoveAll(mod)
	goMod := fmt.Sprintf("module etcdbuild\n\ngo 1.23.0\n\nrequire %s %s\n", etcdModule, version)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644); err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	tmp := filepath.Join(mod, "etcd")
	cmd := exec.Command("go", "build", "-o", tmp, etcdModule)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=auto")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s@%s failed: %v: %s", etcdModule, version, err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("build etcd: %w", err)
	}
	return nil
}

// requiredVersion returns the version of module that the go.mod file at path requires.
func requiredVersion(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("find the version of etcd to build: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("find the version of etcd to build: %s does not require %s", path, module)
}
