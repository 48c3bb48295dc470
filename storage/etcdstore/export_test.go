package etcdstore

import (
	"os"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

// Server returns the etcd server of this test binary.
func Server() *etcdtest.Process { return testServer }

// ServerBin returns the etcdserver program this test binary built.
func ServerBin() string { return serverBin }

// NewTestClient returns a client of the test server, closed when t ends.
func NewTestClient(t testing.TB) *clientv3.Client { return newClient(t, testServer) }

// NewTestStore opens a store under a fresh prefix of the test server, with a client of
// its own; both are closed when t ends.
func NewTestStore(t testing.TB, o *Options) *Store {
	return openStore(t, newClient(t, testServer), newPrefix(), o)
}

// NewPrefix returns a key prefix no other test uses.
func NewPrefix() string { return newPrefix() }

// StartServer starts an etcd server of the test's own, stopped when t ends.
func StartServer(t testing.TB) *etcdtest.Server { return startServer(t) }

// OpenStore opens a store under prefix with client c, closed when t ends.
func OpenStore(t testing.TB, c *clientv3.Client, prefix string, o *Options) *Store {
	return openStore(t, c, prefix, o)
}

// NewClient returns a client of srv, closed when t ends.
func NewClient(t testing.TB, srv interface {
	Client() (*clientv3.Client, error)
}) *clientv3.Client {
	return newClient(t, srv)
}

// BenchServer returns an etcd server for benchmarks, with fsync on, started on first use
// and stopped when the test binary ends.
func BenchServer(b testing.TB) *etcdtest.Server {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "etcdstore-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchDir = dir
		benchSrv, benchErr = etcdtest.Start(dir, etcdtest.Options{})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSrv
}

var (
	benchOnce sync.Once
	benchSrv  *etcdtest.Server
	benchErr  error
	benchDir  string
)

// SessionLease returns the lease that holds the claims of s, or 0 when it has none.
func SessionLease(s *Store) clientv3.LeaseID {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if s.sess == nil {
		return 0
	}
	return s.sess.id
}
