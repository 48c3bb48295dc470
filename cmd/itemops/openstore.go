package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/kubestore"
)

// The environment variables that give an etcd store's TLS files when the flags do not.
const (
	envEtcdCACert = "ITEMOPS_ETCD_CACERT"
	envEtcdCert   = "ITEMOPS_ETCD_CERT"
	envEtcdKey    = "ITEMOPS_ETCD_KEY"
)

// storeFlags are the flags of the commands that open a store by name: the TLS files of
// an etcd store and the kubeconfig of a kubestore.
type storeFlags struct {
	cacert, cert, key string
	kubeconfig        string
}

// addStoreFlags adds the flags of storeFlags to fs.
func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	f := &storeFlags{}
	fs.StringVar(&f.cacert, "cacert", "", "etcd: the `file` of the CA certificates that verify the server (default $"+envEtcdCACert+")")
	fs.StringVar(&f.cert, "cert", "", "etcd: the client certificate `file` (default $"+envEtcdCert+")")
	fs.StringVar(&f.key, "key", "", "etcd: the client key `file` (default $"+envEtcdKey+")")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kube: the kubeconfig `file` (default: as kubectl finds it, $KUBECONFIG or ~/.kube/config)")
	return f
}

// An openMode says what a command does with a store it opens.
type openMode int

const (
	forReading openMode = iota // inspect, check, watch, serve
	forWriting                 // cancel, serve -allow-cancel
)

// An openedStore is a store a command opened by name, closed by close.
type openedStore struct {
	operations.Store
	name  storeName
	close func() error
}

// Close closes the store and what it was opened through.
func (s *openedStore) Close() error { return s.close() }

// openTimeout bounds how long a command waits for an etcd or Kubernetes store to
// answer when it opens it.
const openTimeout = 30 * time.Second

// openNamed opens the store that n names, for mode. No command creates a store: a bolt
// path where there is no file, an etcd prefix without the store's format marker and a
// namespace without the store's marker object fail, naming what is missing, before the
// store's Open could write one. A boltstore is opened read-only for forReading, so that
// several commands may read it at once, and refused (boltstore.ErrLocked) while another
// process writes to it. An etcd store is opened through a client of its endpoints,
// with the TLS files of f or the environment. A kubestore is opened through the
// kubeconfig that f or the environment names, as kubectl loads it, read-only
// (kubestore's Options.ReadOnly) for forReading: it then writes nothing, not even the
// sweep of what writers left half done that a kubestore's Open otherwise makes, so that
// a user with only get and list on the store's resources (kubestore's viewer Role) may
// read it, and check sees those leftovers. It fails with the store's error, or with
// ctx.Err().
func openNamed(ctx context.Context, n storeName, f *storeFlags, mode openMode) (*openedStore, error) {
	switch n.kind {
	case etcdStore:
		return openEtcd(ctx, n, f)
	case kubeStore:
		return openKube(ctx, n, f, mode)
	}
	if _, err := os.Lstat(n.path); err != nil {
		return nil, fmt.Errorf("%w (the command reads an existing store, it never creates one)", err)
	}
	opts := &boltstore.Options{ReadOnly: true}
	if mode == forWriting {
		opts = &boltstore.Options{NoInit: true, OpenFile: openExisting}
	}
	s, err := boltstore.Open(n.path, opts)
	if errors.Is(err, boltstore.ErrLocked) {
		return nil, fmt.Errorf("%w; another process has the store open for writing (a demo running on it?)", err)
	}
	if err != nil {
		return nil, err
	}
	return &openedStore{Store: s, name: n, close: s.Close}, nil
}

// storeTitle names the store of n in what a command prints: "boltstore PATH",
// "etcdstore etcd://..." or "kubestore kube://...".
func storeTitle(n storeName) string {
	switch n.kind {
	case etcdStore:
		return "etcdstore " + n.String()
	case kubeStore:
		return "kubestore " + n.String()
	}
	return "boltstore " + n.path
}

// etcdTLS returns the TLS configuration the flags or the environment give, or nil when
// they give no file.
func etcdTLS(f *storeFlags) (*tls.Config, error) {
	cacert := cmp.Or(f.cacert, os.Getenv(envEtcdCACert))
	cert := cmp.Or(f.cert, os.Getenv(envEtcdCert))
	key := cmp.Or(f.key, os.Getenv(envEtcdKey))
	if cacert == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, fmt.Errorf("etcd CA certificates: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA certificates: %s holds no PEM certificate", cacert)
		}
	}
	if (cert == "") != (key == "") {
		return nil, usageError{"etcd: a client certificate needs its key, and a key its certificate (-cert and -key, or $" + envEtcdCert + " and $" + envEtcdKey + ")"}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// openEtcd opens the etcd store n names; see openNamed.
func openEtcd(ctx context.Context, n storeName, f *storeFlags) (*openedStore, error) {
	tlsCfg, err := etcdTLS(f)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   n.endpoints,
		TLS:         tlsCfg,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", n.endpoints, err)
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	// Open writes the format marker of an empty prefix: the command looks for it first.
	prefix := n.prefix
	if prefix != "" && prefix[len(prefix)-1] != '/' {
		prefix += "/"
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	got, err := c.Get(octx, prefix+"format", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", n.endpoints, err)
	}
	if got.Count == 0 {
		return nil, fmt.Errorf("%s: no store under this prefix (no key %q; the command never creates one)", n, prefix+"format")
	}
	s, err := etcdstore.Open(octx, c, n.prefix, nil)
	if err != nil {
		return nil, err
	}
	ok = true
	return &openedStore{Store: s, name: n, close: func() error {
		return errors.Join(s.Close(), c.Close())
	}}, nil
}

// kubeConfig returns the client configuration of a kubestore name, loaded as kubectl
// loads it: the file of -kubeconfig, else the files of $KUBECONFIG, else
// ~/.kube/config, with the name's context, or the current one.
func kubeConfig(n storeName, f *storeFlags) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: n.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// runsResource is the resource of a kubestore's runs, whose marker openKube looks for.
var runsResource = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopsruns"}

// kubeMarker is the name of the ItemopsRun that marks a namespace as a kubestore's.
const kubeMarker = "itemops"

// openKube opens the kubestore n names for mode; see openNamed.
func openKube(ctx context.Context, n storeName, f *storeFlags, mode openMode) (*openedStore, error) {
	cfg, err := kubeConfig(n, f)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n, err)
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	// A writable Open writes the store's markers in a namespace without them: the
	// command looks for the runs' marker first, to say what is missing either way.
	if _, err := dyn.Resource(runsResource).Namespace(n.namespace).Get(octx, kubeMarker, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: no store in namespace %s (no ItemopsRun %q, or no CRDs installed; the command never creates one)", n, n.namespace, kubeMarker)
		}
		return nil, fmt.Errorf("%s: %w", n, err)
	}
	s, err := kubestore.Open(octx, cfg, n.namespace, &kubestore.Options{ReadOnly: mode == forReading})
	if err != nil {
		return nil, err
	}
	return &openedStore{Store: s, name: n, close: s.Close}, nil
}
