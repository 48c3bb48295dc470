package apiservertest

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// release is a version of etcd, as etcd --version prints it.
type release struct{ major, minor, patch int }

func (r release) String() string { return fmt.Sprintf("%d.%d.%d", r.major, r.minor, r.patch) }

// atLeast reports whether r is min or later.
func (r release) atLeast(min release) bool {
	if r.major != min.major {
		return r.major > min.major
	}
	if r.minor != min.minor {
		return r.minor > min.minor
	}
	return r.patch >= min.patch
}

// minEtcd is the oldest etcd that the kube-apiserver of this package serves from: with
// etcd 3.4 its requests fail with "Timeout: Too large resource version".
var minEtcd = release{3, 5, 0}

// versionLine matches the line of etcd --version that gives etcd's version.
var versionLine = regexp.MustCompile(`(?m)^etcd Version: (\d+)\.(\d+)\.(\d+)`)

// etcdVersion runs etcd at path with --version and returns the version it prints. It
// fails when etcd does not run, within a minute, or prints no version.
func etcdVersion(path string) (release, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return release{}, fmt.Errorf("%s --version: %w: %s", path, err, out)
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return release{}, fmt.Errorf("%s --version printed no line \"etcd Version: x.y.z\": %q", path, out)
	}
	var r release
	for i, n := range []*int{&r.major, &r.minor, &r.patch} {
		if *n, err = strconv.Atoi(string(m[i+1])); err != nil {
			return release{}, fmt.Errorf("%s --version: %w", path, err)
		}
	}
	return r, nil
}

// checkEtcd fails when etcd at path does not run or is older than [minEtcd], saying
// what to do.
func checkEtcd(path string) error {
	r, err := etcdVersion(path)
	if err != nil {
		return err
	}
	if !r.atLeast(minEtcd) {
		return tooOld(path, r)
	}
	return nil
}

// tooOld is the error for etcd at path, whose version r is older than [minEtcd].
func tooOld(path string, r release) error {
	return fmt.Errorf("etcd %s is version %s, and kube-apiserver needs etcd %d.%d or later "+
		"(with an older one its requests fail with \"Timeout: Too large resource version\"): "+
		"set KUBEBUILDER_ASSETS to a directory that holds kube-apiserver and etcd %d.%d or "+
		"later (setup-envtest use -p path prints one), or, in a checkout of %s, leave "+
		"KUBEBUILDER_ASSETS unset: the tests then build etcd at the version that "+
		"storage/etcdstore/go.mod requires, which needs the Go module proxy, and keep it "+
		"in itemops-apiservertest under the user cache directory, or else take an etcd "+
		"%d.%d or later from PATH",
		path, r, minEtcd.major, minEtcd.minor, minEtcd.major, minEtcd.minor, libraryModule, minEtcd.major, minEtcd.minor)
}
