package etcdstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

// testServer is the etcd server of this test binary, started by TestMain in a process of
// its own, built without the race detector: etcd is not under test, and the detector
// would slow it several times over. Each test works under a prefix of its own
// (newPrefix), so tests see an empty store.
var testServer *etcdtest.Process

// serverBin is the etcdserver program TestMain built.
var serverBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcdstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin, err = etcdtest.Build(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// No fsync: the tests stop and restart servers but never the machine.
	testServer, err = etcdtest.StartProcess(serverBin, filepath.Join(dir, "data"), true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	testServer.Stop()
	if benchSrv != nil {
		benchSrv.Stop()
		os.RemoveAll(benchDir)
	}
	if code == 0 {
		// No test leaves a goroutine behind: not the Monitors, not the stores and their
		// claim keepers, not the clients (closed by the tests' cleanups).
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

var prefixes atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix() string { return fmt.Sprintf("t%d/", prefixes.Add(1)) }

// server is an etcd server a test reaches: an etcdtest.Server or Process.
type server interface {
	Client() (*clientv3.Client, error)
}

// newClient returns a client of srv, closed when t ends.
func newClient(t testing.TB, srv server) *clientv3.Client {
	t.Helper()
	c, err := srv.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openStore opens a store under prefix with client c, closed when t ends.
func openStore(t testing.TB, c *clientv3.Client, prefix string, o *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), c, prefix, o)
	if err != nil {
		t.Fatalf("Open(%q): %v", prefix, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startServer starts an etcd server of the test's own, in t.TempDir(), stopped when t
// ends; for tests that stop and restart it.
func startServer(t testing.TB) *etcdtest.Server {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
