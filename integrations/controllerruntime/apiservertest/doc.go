// Package apiservertest starts a real Kubernetes API server, kube-apiserver with its
// etcd through controller-runtime's envtest, once per test binary, for the tests of
// reconcilers that a fake client cannot show: a status subresource, a 409 Conflict on a
// stale resourceVersion, a finalizer for which the server holds back deletion, Events
// read back from the API.
//
// A test binary declares one [Server], stops it in TestMain and asks it for a
// [rest.Config] in each test that needs the API server; the first such test starts it:
//
//	var kube = apiservertest.New(apiservertest.Options{CRDDirectoryPaths: []string{"testdata/crd"}})
//
//	func TestMain(m *testing.M) { os.Exit(kube.StopAfter(m).Run()) }
//
//	func TestReconcile(t *testing.T) {
//		cfg := kube.Config(t) // skips, or fails under CI=true, when no API server can start
//		...
//	}
//
// # Finding kube-apiserver and etcd
//
// The server's binaries are looked for in this order:
//
//  1. The directory named by KUBEBUILDER_ASSETS, which must hold kube-apiserver and etcd:
//     what setup-envtest gives (setup-envtest use -p path prints such a directory).
//  2. This repository's own, when the test runs inside a checkout of it (a directory
//     above the test's working directory whose go.mod declares module
//     github.com/itemops/itemops): kube-apiserver unpacked with xz from
//     ../shared/kube/kube-apiserver.xz, beside the checkout, and checked against
//     ../shared/kube/SHA256SUMS; etcd at the version of go.etcd.io/etcd/server/v3 that
//     storage/etcdstore/go.mod requires, built with the go command (which needs the
//     module proxy or a module cache that holds it), or taken from PATH when it is that
//     version. Both are kept in a directory under [os.UserCacheDir], so only the first
//     run unpacks and builds. When the build fails, an etcd on PATH of another version
//     serves if it is 3.5 or later.
//  3. Otherwise the tests that call [Server.Config] skip with a message that says how to
//     provide the binaries; when the environment sets CI=true they fail instead, so
//     that a CI run that lost its binaries does not pass by skipping.
//
// kube-apiserver needs etcd 3.5 or later: with 3.4 (Debian's etcd 3.4.23, say) its
// requests fail with "Timeout: Too large resource version". Before it starts a server,
// Config runs etcd --version and refuses an older etcd with a message that says what
// to do: an etcd 3.4 in KUBEBUILDER_ASSETS fails the test, CI or not; one on PATH is
// passed over, and when no other etcd can be had the test skips, or fails under
// CI=true, as in step 3.
//
// # Disturbing a server
//
// [Server.PauseAPIServer] and [Server.ResumeAPIServer] stop kube-apiserver's process
// and let it run again, and [Server.RestartEtcd] kills its etcd and starts it again on
// the same data, for tests of what clients do when the server hangs or loses its
// storage. Such a test takes a Server of its own, as no other test could bear them.
//
// A server whose binaries were found but which fails to start, or to install the CRDs
// of [Options], fails the tests that ask for it, CI or not.
//
// # A test binary that dies
//
// On Linux, kube-apiserver and etcd die with the test binary that started them, even
// when it ends without [Server.StopAfter]'s stop: a test binary that panics, that go
// test ends at its -timeout, or that is killed with SIGKILL. envtest lets no caller set
// how it starts a process, so the server's directory of binaries holds launchers: shell
// scripts that start the test binary again, whose init function asks Linux for a
// parent-death signal (prctl PR_SET_PDEATHSIG, SIGKILL), checks that its parent is
// still the test binary, and execs kube-apiserver or etcd. Linux sends that signal when
// the thread that started the process ends, not only the process, and Go ends a thread
// when a goroutine locked to it returns; the server's processes are started from a
// goroutine locked to a thread of its own, which it keeps until the server stops, so
// no thread that ends meanwhile takes them with it. Elsewhere than Linux, a test binary
// that dies leaves its kube-apiserver and etcd running until killed.
package apiservertest
