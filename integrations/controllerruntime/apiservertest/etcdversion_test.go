package apiservertest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeEtcd writes at path a script that prints, for --version, what etcd of version
// does, and returns path.
func fakeEtcd(t *testing.T, path, version string) string {
	t.Helper()
	script := "#!/bin/sh\nprintf 'etcd Version: " + version + "\\nGit SHA: Not provided\\nGo Version: go1.22\\nGo OS/Arch: linux/amd64\\n'\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

// etcdOnPath makes PATH a directory that holds only a fake etcd of version, or no etcd
// when version is "", and returns the fake's path.
func etcdOnPath(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if version == "" {
		return ""
	}
	return fakeEtcd(t, filepath.Join(dir, "etcd"), version)
}

// TestEtcdVersion: etcd's --version is read, 3.4 is refused with a message that says
// why and what to do, 3.5 and later are taken, and an etcd that prints no version
// fails.
func TestEtcdVersion(t *testing.T) {
	dir := t.TempDir()
	old := fakeEtcd(t, filepath.Join(dir, "etcd-old"), "3.4.23")
	got, err := etcdVersion(old)
	require.NoError(t, err)
	require.Equal(t, release{3, 4, 23}, got)
	err = checkEtcd(old)
	require.ErrorContains(t, err, "is version 3.4.23, and kube-apiserver needs etcd 3.5 or later")
	require.ErrorContains(t, err, "Too large resource version")
	require.ErrorContains(t, err, "set KUBEBUILDER_ASSETS to a directory that holds kube-apiserver and etcd 3.5 or later")
	require.ErrorContains(t, err, "storage/etcdstore/go.mod")

	for _, v := range []string{"3.5.0", "3.5.17", "3.6.4", "4.0.0"} {
		require.NoError(t, checkEtcd(fakeEtcd(t, filepath.Join(dir, "etcd-"+v), v)), "etcd %s", v)
	}

	mute := filepath.Join(dir, "etcd-mute")
	require.NoError(t, os.WriteFile(mute, []byte("#!/bin/sh\necho hello\n"), 0o755))
	require.ErrorContains(t, checkEtcd(mute), `printed no line "etcd Version: x.y.z"`)
	broken := filepath.Join(dir, "etcd-broken")
	require.NoError(t, os.WriteFile(broken, []byte("#!/bin/sh\nexit 3\n"), 0o755))
	require.ErrorContains(t, checkEtcd(broken), "exit status 3")
}

// TestChooseEtcd: the etcd that the repository pins, built or on PATH, comes first; a
// build comes before another version on PATH; the etcd on PATH is taken only when the
// build fails and it is 3.5 or later; a 3.4 on PATH is never taken.
func TestChooseEtcd(t *testing.T) {
	const pinned = "v3.6.4"
	failed := errors.New("go build go.etcd.io/etcd/server/v3@v3.6.4 failed: no module proxy")
	for _, tc := range []struct {
		name      string
		built     bool   // whether the pinned etcd is built already
		onPath    string // the version of the etcd on PATH, "" for none
		buildErr  error  // what the build returns
		want      string // "built" or "path"
		wantBuild bool   // whether the build runs
		wantErr   []string
	}{
		{name: "built already, before PATH", built: true, onPath: "3.6.4", want: "built"},
		{name: "the pinned version on PATH, without a build", onPath: "3.6.4", want: "path"},
		{name: "a build, before another version on PATH", onPath: "3.5.9", want: "built", wantBuild: true},
		{name: "a build, before a 3.4 on PATH", onPath: "3.4.23", want: "built", wantBuild: true},
		{name: "a build when no etcd is on PATH", want: "built", wantBuild: true},
		{name: "3.5 on PATH when the build fails", onPath: "3.5.9", buildErr: failed, want: "path", wantBuild: true},
		{
			name: "3.4 on PATH is refused when the build fails", onPath: "3.4.23", buildErr: failed, wantBuild: true,
			wantErr: []string{"the etcd on PATH cannot be used", "is version 3.4.23, and kube-apiserver needs etcd 3.5 or later", "no module proxy"},
		},
		{
			name: "no etcd at all", buildErr: failed, wantBuild: true,
			wantErr: []string{"no etcd is on PATH", "no module proxy"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := etcdOnPath(t, tc.onPath)
			built := filepath.Join(t.TempDir(), "etcd-"+pinned)
			if tc.built {
				fakeEtcd(t, built, "3.6.4")
			}
			ran := false
			got, err := chooseEtcd(pinned, built, func() error {
				ran = true
				if tc.buildErr != nil {
					return tc.buildErr
				}
				fakeEtcd(t, built, "3.6.4")
				return nil
			})
			require.Equal(t, tc.wantBuild, ran, "whether the build ran")
			if tc.wantErr != nil {
				var missing *missingError
				require.ErrorAs(t, err, &missing)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			want := map[string]string{"built": built, "path": path}[tc.want]
			require.Equal(t, want, got)
		})
	}
}

// TestConfigRefusesOldEtcd: an etcd 3.4 in KUBEBUILDER_ASSETS fails the test that asks
// for the server, CI or not, before any process starts, with a message that says what
// to do; the server it would have made fails every request with "Timeout: Too large
// resource version".
func TestConfigRefusesOldEtcd(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	fakeEtcd(t, filepath.Join(dir, "etcd"), "3.4.23")
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	t.Setenv("CI", "")
	s := New(Options{})
	r := configOf(s)
	require.True(t, r.failed, "failed")
	require.Contains(t, r.msg, "KUBEBUILDER_ASSETS="+dir)
	require.Contains(t, r.msg, "is version 3.4.23, and kube-apiserver needs etcd 3.5 or later")
	require.Equal(t, 0, s.StopAfter(runFunc(func() int { return 0 })).Run(), "StopAfter with no server started")
}
