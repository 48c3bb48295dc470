package apiservertest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configures a [Server].
type Options struct {
	// CRDDirectoryPaths lists files or directories of CustomResourceDefinition manifests
	// (YAML or JSON) that the server installs when it starts; relative paths are read
	// from the test's working directory, its package's directory. A path that does not
	// exist makes the start fail. Empty by default: no CRDs.
	CRDDirectoryPaths []string
}

// TB is the part of [testing.TB] that [Server.Config] uses.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
}

// M is what TestMain runs: a [testing.M], or a wrapper of one.
type M interface{ Run() int }

// Server is a kube-apiserver with its etcd, shared by the tests of one test binary. The
// first call of [Server.Config] starts it; [Server.StopAfter] stops it after the tests.
// A Server is safe for concurrent use by parallel tests. Its zero value is not usable:
// call [New].
type Server struct {
	opts Options

	startOnce sync.Once
	env       *envtest.Environment // nil until the server started
	usersMu   sync.Mutex           // guards env's AddUser, which signs a certificate with the server's CA
	launchers string               // the directory of the launchers that envtest starts, removed after the server stops
	thread    *lockedThread        // the thread that starts the server's processes, until it stops
	data      string               // etcd's data directory, removed after the server stops
	etcdMu    sync.Mutex           // serializes RestartEtcd
	cfg       *rest.Config         // nil when the start failed
	err       error                // why the start failed
}

// New returns a Server that is not started yet.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// Config returns the configuration of a client of the server, an administrator of the
// whole cluster, starting the server on the first call. Each call returns a copy that
// the test may change. When no kube-apiserver and etcd can be found Config skips the
// test, saying how to provide them, or fails it when the environment sets CI=true; when
// they were found but the server did not start, it fails the test. Every later call
// gives the first call's outcome: the server is started once per test binary.
func (s *Server) Config(t TB) *rest.Config {
	t.Helper()
	s.startOnce.Do(s.start)
	if s.err != nil {
		var missing *missingError
		if errors.As(s.err, &missing) && os.Getenv("CI") != "true" {
			t.Skip(s.err)
		}
		t.Fatal(s.err)
	}
	return rest.CopyConfig(s.cfg)
}

// UserConfig returns the configuration of a client of the server that authenticates as
// the user called name, a member of groups (and of system:authenticated, as every user
// is), by a client certificate the server trusts. The server authorizes by RBAC, so
// such a user may do only what Roles and ClusterRoles bound to its name or groups
// allow: a test runs code as an operator's service account would, with exactly the
// rights it is given. UserConfig starts the server as [Server.Config] does, skipping or
// failing the test as Config does; it fails the test when the certificate cannot be
// made. Each call returns a new configuration that the test may change.
func (s *Server) UserConfig(t TB, name string, groups ...string) *rest.Config {
	t.Helper()
	admin := s.Config(t)
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	user, err := s.env.AddUser(envtest.User{Name: name, Groups: groups}, admin)
	if err != nil {
		t.Fatal(fmt.Errorf("add user %s: %w", name, err))
	}
	return user.Config()
}

// start finds the binaries and starts the server, keeping the outcome in s.
func (s *Server) start() {
	bins, err := findBinaries()
	if err != nil {
		s.err = err
		return
	}
	launchers, err := bins.directory()
	if err != nil {
		s.err = err
		return
	}
	// etcd's data is in a directory of the Server's own, which envtest neither makes
	// nor removes, so that RestartEtcd can start etcd again on it.
	data, err := os.MkdirTemp("", "apiservertest-etcd-")
	if err != nil {
		s.err = err
		os.RemoveAll(launchers)
		return
	}
	env := &envtest.Environment{BinaryAssetsDirectory: launchers}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: data}
	thread := startLockedThread()
	var cfg *rest.Config
	thread.do(func() { cfg, err = startEnv(env, launchers) })
	if err != nil {
		thread.stop()
		// envtest stops etcd itself when kube-apiserver fails to start; its Stop would
		// dereference the kube-apiserver that never ran.
		s.err = fmt.Errorf("start kube-apiserver (%s) and etcd (%s) with envtest: %w", bins.apiServer, bins.etcd, err)
		os.RemoveAll(launchers)
		os.RemoveAll(data)
		return
	}
	s.env, s.launchers, s.data, s.thread = env, launchers, data, thread
	// The CRDs are installed once the server runs, so that a failure stops it.
	if len(s.opts.CRDDirectoryPaths) > 0 {
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: s.opts.CRDDirectoryPaths, ErrorIfPathMissing: true})
		if err != nil {
			s.err = fmt.Errorf("install the CRDs of %v: %w", s.opts.CRDDirectoryPaths, err)
			return
		}
	}
	s.cfg = cfg
}

// envMu serializes [startEnv]'s changes of the environment.
var envMu sync.Mutex

// startEnv starts env with the kube-apiserver and etcd of the launchers directory.
// envtest takes them from KUBEBUILDER_ASSETS when that is set, before the directory it
// is given, and first from TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, so these
// name the launchers while env starts, and are then as they were.
func startEnv(env *envtest.Environment, launchers string) (*rest.Config, error) {
	envMu.Lock()
	defer envMu.Unlock()
	for name, file := range map[string]string{"TEST_ASSET_KUBE_APISERVER": "kube-apiserver", "TEST_ASSET_ETCD": "etcd"} {
		if old, ok := os.LookupEnv(name); ok {
			defer os.Setenv(name, old)
		} else {
			defer os.Unsetenv(name)
		}
		if err := os.Setenv(name, filepath.Join(launchers, file)); err != nil {
			return nil, err
		}
	}
	return env.Start()
}

// StopAfter returns an M whose Run runs m's tests and then stops the server, if a test
// started it, and returns m's exit code; 1 if the tests passed but the server did not
// stop, which it reports on standard error. It composes with wrappers of TestMain such
// as goleak.VerifyTestMain:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(kube.StopAfter(m)) }
func (s *Server) StopAfter(m M) M {
	return runFunc(func() int {
		code := m.Run()
		if s.env == nil {
			return code
		}
		_ = s.ResumeAPIServer() // a test that failed within a pause leaves it stopped
		err := s.env.Stop()
		s.thread.stop()
		err = errors.Join(err, os.RemoveAll(s.launchers), os.RemoveAll(s.data))
		if err != nil {
			fmt.Fprintf(os.Stderr, "apiservertest: stop kube-apiserver and etcd: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		return code
	})
}

type runFunc func() int

func (f runFunc) Run() int { return f() }
