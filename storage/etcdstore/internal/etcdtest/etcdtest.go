// Package etcdtest starts a real etcd server inside a test process, for the tests and
// benchmarks of package etcdstore: one member, on loopback ports chosen free, its data in
// a directory the caller gives, its logs discarded (but for errors, when asked).
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Options configures [Start]. The zero Options syncs to disk, discards all logs and
// listens on free loopback ports.
type Options struct {
	// ClientURL and PeerURL are where the server listens, such as
	// "http://127.0.0.1:2379"; empty means a free loopback port.
	ClientURL, PeerURL string
	// NoFsync turns off etcd's fsync, for tests that do not need durability across a
	// crash of the machine. Benchmarks leave it off.
	NoFsync bool
	// Logger receives the server's logs; nil discards them.
	Logger *zap.Logger
	// AutoCompaction, when not zero, makes the server compact its history every
	// AutoCompaction, keeping that much of it (etcd's --auto-compaction-mode=periodic
	// --auto-compaction-retention), as docs of package etcdstore recommend.
	AutoCompaction time.Duration
}

// A Server is an etcd server running in this process. Its methods are safe for
// concurrent use.
type Server struct {
	dir  string
	opts Options
	// clientURL and peerURL keep the ports chosen at Start across restarts.
	clientURL, peerURL url.URL

	mu sync.Mutex // guards e
	e  *embed.Etcd
}

// readyTimeout bounds how long Start and Restart wait for the server to serve.
const readyTimeout = time.Minute

// Start starts a server whose data lives in dir, which must be empty or hold the data of
// an earlier server started there.
func Start(dir string, o Options) (*Server, error) {
	if o.ClientURL == "" || o.PeerURL == "" {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		o.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		o.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	}
	cu, err := url.Parse(o.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: client URL: %w", err)
	}
	pu, err := url.Parse(o.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: peer URL: %w", err)
	}
	s := &Server{dir: dir, opts: o, clientURL: *cu, peerURL: *pu}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	cfg := embed.NewConfig()
	cfg.Name = "itemops-test"
	cfg.Dir = s.dir
	lg := s.opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Short ticks: a one-member cluster elects itself at once, and leases may be as
	// short as a second.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = s.opts.NoFsync
	if s.opts.AutoCompaction > 0 {
		cfg.AutoCompactionMode = "periodic"
		cfg.AutoCompactionRetention = s.opts.AutoCompaction.String()
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start etcd in %s: %w", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: etcd in %s failed to start: %w", s.dir, err)
	case <-time.After(readyTimeout):
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("etcdtest: etcd in %s not ready after %s", s.dir, readyTimeout)
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	return nil
}

// Endpoint is the URL clients reach the server at; it stays the same across restarts.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Client returns a new client of the server, with its logs discarded. The caller closes
// it. It reconnects within a fraction of a second of a restart (gRPC's default backoff
// would wait seconds).
func (s *Server) Client() (*clientv3.Client, error) { return NewClient(s.Endpoint()) }

// NewClient returns a new client of the server at endpoint, as [Server.Client] does.
func NewClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
}

// Stop stops the server, keeping its data; Restart starts it again. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped server again, on the same ports, with the same data.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.e != nil
	s.mu.Unlock()
	if running {
		return errors.New("etcdtest: restart: the server is running")
	}
	return s.start()
}

// FreePorts returns n loopback TCP ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
