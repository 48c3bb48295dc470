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

// directory returns a directory in which envtest finds b as kube-apiserver and etcd: the
// one that holds them under those names, else a new one with symbolic links to them,
// which the caller removes after use (its path is links).
func (b binaries) directory() (dir, links string, err error) {
	dir = filepath.Dir(b.apiServer)
	if filepath.Base(b.apiServer) == "kube-apiserver" && b.etcd == filepath.Join(dir, "etcd") {
		return dir, "", nil
	}
	links, err = os.MkdirTemp("", "apiservertest-")
	if err == nil {
		err = errors.Join(os.Symlink(b.apiServer, filepath.Join(links, "kube-apiserver")), os.Symlink(b.etcd, filepath.Join(links, "etcd")))
	}
	if err != nil {
		os.RemoveAll(links)
		return "", "", fmt.Errorf("link kube-apiserver and etcd into one directory for envtest: %w", err)
	}
	return links, links, nil
}

// findBinaries looks for kube-apiserver and etcd as the package comment says. It returns
// a *missingError when they are not there to be found, and another error when they are
// but cannot be used (an archive whose checksum is wrong, a cache directory it cannot
// write).
func findBinaries() (binaries, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		b := binaries{apiServer: filepath.Join(dir, "kube-apiserver"), etcd: filepath.Join(dir, "etcd")}
		for _, path := range []string{b.apiServer, b.etcd} {
			if _, err := os.Stat(path); err != nil {
				return binaries{}, &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS=%s: %v", dir, err)}
			}
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

// findEtcd returns the path of etcd: the one on PATH, else one in cache built at the
// version of etcd's server module that the checkout's storage/etcdstore/go.mod
// requires, building it first when the cache lacks it.
func findEtcd(root, cache string) (string, error) {
	if path, err := exec.LookPath("etcd"); err == nil {
		return path, nil
	}
	pins := filepath.Join(root, "storage", "etcdstore", "go.mod")
	version, err := requiredVersion(pins, etcdModule)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cache, "etcd-"+version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	// A module of its own requires etcd's server module, whose go.mod holds replace
	// directives that go install pkg@version refuses.
	mod, err := os.MkdirTemp(cache, "etcd-build-*")
	if err != nil {
		return "", fmt.Errorf("build etcd: %w", err)
	}
	defer os.RemoveAll(mod)
	goMod := fmt.Sprintf("module etcdbuild\n\ngo 1.23.0\n\nrequire %s %s\n", etcdModule, version)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644); err != nil {
		return "", fmt.Errorf("build etcd: %w", err)
	}
	tmp := filepath.Join(mod, "etcd")
	cmd := exec.Command("go", "build", "-o", tmp, etcdModule)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=auto")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &missingError{looked: fmt.Sprintf("KUBEBUILDER_ASSETS is not set, no etcd is on PATH, and go build %s@%s failed: %v: %s", etcdModule, version, err, out)}
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("build etcd: %w", err)
	}
	return path, nil
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
