package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/kubestore"
)

// kube is the API server of this test binary, started by the first kube test
// (KUBEBUILDER_ASSETS; the test skips without it unless CI=true) and stopped by TestMain.
var kube = apiservertest.New(apiservertest.Options{})

func TestMain(m *testing.M) { os.Exit(kube.StopAfter(m).Run()) }

// guard bounds every wait of these tests, against a hang; no test asserts a time.
const guard = 30 * time.Second

// seedRuns writes, on s, a backup b1 and a restore r1 waiting for their plugins'
// operations: three of the "mover" plugin for b1 and two for r1, in progress.
func seedRuns(t *testing.T, s operations.Store) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for _, run := range []struct {
		kind phase.Kind
		name string
		ops  int
	}{{phase.Backup, "b1", 3}, {phase.Restore, "r1", 2}} {
		o := operations.Owner{Kind: run.kind, Name: run.name}
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.InProgress, "started", t0))
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0.Add(time.Second)))
		require.NoError(t, s.CreateRun(ctx, r))
		var ops []operations.Operation
		for i := range run.ops {
			ops = append(ops, operations.Operation{
				Owner: o, Action: "mover", ID: fmt.Sprintf("%s-op%d", run.name, i),
				Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: fmt.Sprintf("data-%d", i)},
				Status:   operations.Status{Phase: operations.OperationInProgress, Created: t0, NTotal: 100, OperationUnits: "Bytes"},
			})
		}
		require.NoError(t, s.PutOperations(ctx, o, ops))
	}
}

// startMonitor runs a Monitor on s until the test ends. Its plugin reports b1's
// operations at 40 of 100 bytes until release is closed, then done; r1's stay at 10
// of 100 until cancelled.
func startMonitor(t *testing.T, s operations.Store, release <-chan struct{}) {
	t.Helper()
	tr := &operationstest.Tracker{ProgressFunc: func(_ context.Context, op operations.Operation) (operations.Progress, error) {
		if op.Owner.Name != "b1" {
			return operations.Progress{NCompleted: 10, NTotal: 100, OperationUnits: "Bytes"}, nil
		}
		select {
		case <-release:
			return operations.Progress{Completed: true, NCompleted: 100, NTotal: 100, OperationUnits: "Bytes"}, nil
		default:
			return operations.Progress{NCompleted: 40, NTotal: 100, OperationUnits: "Bytes"}, nil
		}
	}}
	m := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"mover": tr}),
		monitor.WithInterval(50*time.Millisecond), monitor.WithStallTimeout(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor waits until the run of o in s is in phase p.
func waitFor(t *testing.T, s operations.Store, o operations.Owner, p phase.Phase) operations.Run {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		r, err := s.GetRun(context.Background(), o)
		require.NoError(t, err)
		if r.Phase == p {
			return r
		}
		require.True(t, time.Now().Before(deadline), "%s is %s, never %s", o, r.Phase, p)
		time.Sleep(20 * time.Millisecond)
	}
}

// exerciseCommands runs every command on the store name (flags: the store flags it
// needs) while a Monitor works on s, the same store: inspect (text and JSON), check,
// cancel of r1 (which the Monitor then fails), serve and a GET of a run's page, and
// watch of b1 to its end. wantCheck is what check prints after "sound; ".
func exerciseCommands(t *testing.T, s operations.Store, name string, flags []string, wantCheck string) {
	seedRuns(t, s)
	release := make(chan struct{})
	startMonitor(t, s, release)
	// The Monitor's first pass records the plugin's counts.
	deadline := time.Now().Add(guard)
	for {
		ops, err := s.ListOperations(context.Background(), operations.Owner{Kind: phase.Backup, Name: "b1"}, operations.OperationFilter{})
		require.NoError(t, err)
		if len(ops) == 3 && ops[0].Status.NCompleted == 40 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the Monitor never recorded b1's progress")
		time.Sleep(20 * time.Millisecond)
	}
	args := func(cmd string, rest ...string) []string {
		a := append([]string{cmd}, flags...)
		return append(a, rest...)
	}

	status, out, errOut := runCLI(args("inspect", name)...)
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, ": 2 runs (1 Backup, 1 Restore), 5 operations (5 InProgress)")
	for _, want := range []string{"Backup b1: WaitingForPluginOperations", "Restore r1: WaitingForPluginOperations",
		"PROGRESSED", "NEXT POLL", "b1-op2", "r1-op1", "persistentvolumeclaims shop/data-1", "main run ended", "40% of 100 Bytes"} {
		require.Contains(t, out, want)
	}

	status, out, errOut = runCLI(args("inspect", "-o", "json", "-run", "b1", name)...)
	require.Equal(t, 0, status, errOut)
	var got struct {
		Store string
		Runs  []struct {
			Run        operations.Run
			Operations []operations.Operation
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got.Runs, 1)
	require.Equal(t, "b1", got.Runs[0].Run.Owner.Name)
	require.Equal(t, phase.WaitingForPluginOperations, got.Runs[0].Run.Phase)
	require.Len(t, got.Runs[0].Operations, 3)
	require.Equal(t, int64(40), got.Runs[0].Operations[0].Status.NCompleted)

	status, out, errOut = runCLI(args("check", name)...)
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "sound; "+wantCheck)

	status, out, errOut = runCLI(args("cancel", "-reason", "jane: wrong namespace", name, "r1")...)
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "Restore r1: cancel requested (jane: wrong namespace)")
	r := waitFor(t, s, operations.Owner{Kind: phase.Restore, Name: "r1"}, phase.Failed)
	require.Contains(t, r.FailureReason, "jane: wrong namespace")

	// serve stops at the end of the subtest: it holds a boltstore file open.
	t.Run("serve", func(t *testing.T) {
		base := startServe(t, append(flags, name)...)
		code, page := fetch(t, base+"run?kind=Backup&name=b1")
		require.Equal(t, 200, code, page)
		require.Contains(t, page, "b1-op0")
		code, page = fetch(t, base+"?format=json")
		require.Equal(t, 200, code, page)
		require.Contains(t, page, `"r1"`)
	})

	// watch b1: it prints the run waiting, then, once the plugin is done, the run at
	// its end, and returns.
	watched := make(chan [3]any, 1)
	go func() {
		status, out, errOut := runCLI(args("watch", "-interval", "50ms", name, "b1")...)
		watched <- [3]any{status, out, errOut}
	}()
	time.Sleep(200 * time.Millisecond) // let watch show the waiting run first; not asserted
	close(release)
	var res [3]any
	select {
	case res = <-watched:
	case <-time.After(guard):
		b1, err := s.GetRun(context.Background(), operations.Owner{Kind: phase.Backup, Name: "b1"})
		t.Fatalf("watch did not return after its run ended; b1 is %s (%v)", b1.Phase, err)
	}
	require.Equal(t, 0, res[0], res[2])
	out = res[1].(string)
	require.Contains(t, out, "Backup b1: Completed")
	require.Contains(t, out, "b1-op2: Completed")
	require.NotContains(t, out, "\x1b[", "watch redraws only on a terminal")
}

// TestCommandsOnBolt runs the commands on a boltstore file named by a bolt:// URL. The
// file's writer holds bbolt's lock while it is open, so the Monitor here works on the
// store through a wrapper that opens the file for each call; see lockingStore.
func TestCommandsOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	exerciseCommands(t, &reopening{path: path}, "bolt://"+path, nil, "2 runs, 5 operations")
}

// reopening is an operations.Store of a boltstore file that opens the file for each
// call and closes it after, so that the commands, which open it too, find it unlocked
// between calls. A call that finds it locked (a command reading it) waits its turn.
type reopening struct {
	path string
	mu   sync.Mutex
}

func (r *reopening) with(ctx context.Context, f func(s *boltstore.Store) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		s, err := boltstore.Open(r.path, &boltstore.Options{NoInit: true, SkipCheck: true, Timeout: 50 * time.Millisecond})
		if err == nil {
			defer s.Close()
			return f(s)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, boltstore.ErrLocked) {
			return err
		}
	}
}

func (r *reopening) CreateRun(ctx context.Context, run operations.Run) error {
	return r.with(ctx, func(s *boltstore.Store) error { return s.CreateRun(ctx, run) })
}

func (r *reopening) GetRun(ctx context.Context, o operations.Owner) (run operations.Run, err error) {
	err = r.with(ctx, func(s *boltstore.Store) error { run, err = s.GetRun(ctx, o); return err })
	return run, err
}

func (r *reopening) UpdateRun(ctx context.Context, o operations.Owner, f func(*operations.Run) error) (run operations.Run, err error) {
	err = r.with(ctx, func(s *boltstore.Store) error { run, err = s.UpdateRun(ctx, o, f); return err })
	return run, err
}

func (r *reopening) ListRuns(ctx context.Context, f operations.RunFilter) (runs []operations.Run, err error) {
	err = r.with(ctx, func(s *boltstore.Store) error { runs, err = s.ListRuns(ctx, f); return err })
	return runs, err
}

func (r *reopening) DeleteRun(ctx context.Context, o operations.Owner) error {
	return r.with(ctx, func(s *boltstore.Store) error { return s.DeleteRun(ctx, o) })
}

func (r *reopening) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	return r.with(ctx, func(s *boltstore.Store) error { return s.PutOperations(ctx, o, ops) })
}

func (r *reopening) GetOperation(ctx context.Context, o operations.Owner, id string) (op operations.Operation, err error) {
	err = r.with(ctx, func(s *boltstore.Store) error { op, err = s.GetOperation(ctx, o, id); return err })
	return op, err
}

func (r *reopening) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) (ops []operations.Operation, err error) {
	err = r.with(ctx, func(s *boltstore.Store) error { ops, err = s.ListOperations(ctx, o, f); return err })
	return ops, err
}

// TestCommandsOnEtcd runs the commands on an etcd store, on an etcd server started in
// the test process.
func TestCommandsOnEtcd(t *testing.T) {
	endpoint := startEtcd(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	// No command creates a store: a prefix without one is refused, and left empty.
	status, _, errOut := runCLI("inspect", "etcd://"+endpoint+"/nothing")
	require.Equal(t, 1, status)
	require.Contains(t, errOut, "no store under this prefix")
	got, err := c.Get(ctx, "nothing", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, got.Count)

	s, err := etcdstore.Open(ctx, c, "itemops", nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	exerciseCommands(t, s, "etcd://"+endpoint+"/itemops", nil, "2 runs, 5 operations")
}

// startEtcd starts an etcd server, in the test process, on free loopback ports, with
// its data in a temporary directory, until the test ends, and returns its endpoint.
func startEtcd(t *testing.T) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "itemops-cmd-test"
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, peer := url.URL{Scheme: "http", Host: "127.0.0.1:0"}, url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(guard):
		t.Fatal("etcd not ready")
	}
	return e.Clients[0].Addr().String()
}

// TestCommandsOnKube runs the commands on a kubestore in a namespace of a real
// kube-apiserver (apiservertest), named by kube://CONTEXT/NAMESPACE in a kubeconfig file
// written for it.
func TestCommandsOnKube(t *testing.T) {
	cfg := kube.Config(t)
	ctx := context.Background()
	require.NoError(t, kubestore.InstallCRDs(ctx, cfg))
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	for _, ns := range []string{"cmd-empty", "cmd-store", "cmd-damaged"} {
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test-admin"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.Contexts["other"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "nobody"}
	// viewer is a user with only the viewer Role of kubestore.RBAC (get and list), bound
	// below in cmd-store.
	viewer := kube.UserConfig(t, "itemops-viewer")
	kc.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{ClientCertificateData: viewer.CertData, ClientKeyData: viewer.KeyData}
	kc.Contexts["viewer"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "viewer"}
	kc.CurrentContext = "other"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	flags := []string{"-kubeconfig", kubeconfig}

	// No command creates a store: a namespace without one is refused, and left empty.
	status, _, errOut := runCLI("inspect", "-kubeconfig", kubeconfig, "kube://test-admin/cmd-empty")
	require.Equal(t, 1, status)
	require.Contains(t, errOut, "no store in namespace cmd-empty")
	list, err := cs.CoreV1().ConfigMaps("cmd-empty").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range list.Items {
		require.Equal(t, "kube-root-ca.crt", cm.Name, "the command wrote to the namespace")
	}
	// KUBECONFIG is read as kubectl reads it, with its current context, here one whose
	// user the kubeconfig does not define: the server sees an anonymous user.
	t.Setenv("KUBECONFIG", kubeconfig)
	status, _, errOut = runCLI("inspect", "kube:///cmd-store")
	require.Equal(t, 1, status)
	require.Contains(t, errOut, `User "system:anonymous" cannot get resource "itemopsruns"`)

	s, err := kubestore.Open(ctx, cfg, "cmd-store", nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	exerciseCommands(t, s, "kube://test-admin/cmd-store", flags, "2 runs, 5 operations (2 run objects, 0 chunks)")

	// A user with only get and list on the store's resources (the viewer Role) inspects
	// and checks the store, which they open read-only (a writable Open would need more:
	// the sweep's deletes, the markers' creation).
	roleYAML, err := kubestore.RBAC.ReadFile("rbac/viewer-role.yaml")
	require.NoError(t, err)
	var role rbacv1.Role
	require.NoError(t, utilyaml.Unmarshal(roleYAML, &role))
	_, err = cs.RbacV1().Roles("cmd-store").Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings("cmd-store").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "itemops-viewer"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The API server authorizes by a binding a moment after it is made.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		status, _, errOut = runCLI("inspect", "-kubeconfig", kubeconfig, "kube://viewer/cmd-store")
		if status == 0 || !strings.Contains(errOut, "forbidden") || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, 0, status, errOut)
	status, out, errOut := runCLI("inspect", "-kubeconfig", kubeconfig, "kube://viewer/cmd-store")
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, ": 2 runs (1 Backup, 1 Restore)")
	status, out, errOut = runCLI("check", "-kubeconfig", kubeconfig, "kube://viewer/cmd-store")
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "sound; 2 runs, 5 operations (2 run objects, 0 chunks)")

	// A damaged namespace: a run's object whose status bytes were edited, and an
	// ItemopsChunk that the store did not name. check fails with one line that names
	// both, and changes neither.
	damaged, err := kubestore.Open(ctx, cfg, "cmd-damaged", nil)
	require.NoError(t, err)
	t.Cleanup(func() { damaged.Close() })
	seedRuns(t, damaged)
	dyn := dynamic.NewForConfigOrDie(cfg)
	runs := dyn.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopsruns"}).Namespace("cmd-damaged")
	obj, err := runs.Get(ctx, "b.b1", metav1.GetOptions{})
	require.NoError(t, err)
	data, _, _ := unstructured.NestedString(obj.Object, "status", "store", "data")
	raw, err := base64.StdEncoding.DecodeString(data)
	require.NoError(t, err)
	raw[len(raw)-1] ^= 1
	require.NoError(t, unstructured.SetNestedField(obj.Object, base64.StdEncoding.EncodeToString(raw), "status", "store", "data"))
	edited, err := runs.Update(ctx, obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	notes := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"seq": int64(1)}}}
	notes.SetAPIVersion(kubestore.Group + "/" + kubestore.Version)
	notes.SetKind("ItemopsChunk")
	notes.SetName("notes")
	chunks := dyn.Resource(schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopschunks"}).Namespace("cmd-damaged")
	_, err = chunks.Create(ctx, notes, metav1.CreateOptions{})
	require.NoError(t, err)
	// A chunk that a commit left behind, of a run whose object is gone, which a sweep
	// deletes: check reports it and leaves it, as it opens the store read-only, without
	// the sweep of a writable Open.
	label := strings.Repeat("e", 40)
	leftover := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"seq": int64(1)}}}
	leftover.SetAPIVersion(kubestore.Group + "/" + kubestore.Version)
	leftover.SetKind("ItemopsChunk")
	leftover.SetName("c." + label + ".0000000000000001.00000000000000dd")
	leftover.SetLabels(map[string]string{"itemops.io/role": "chunk", "itemops.io/run": label})
	_, err = chunks.Create(ctx, leftover, metav1.CreateOptions{})
	require.NoError(t, err)
	status, out, errOut = runCLI("check", "-kubeconfig", kubeconfig, "kube://test-admin/cmd-damaged")
	require.Equal(t, 1, status, out)
	require.Empty(t, out)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	require.Contains(t, errOut, "kube://test-admin/cmd-damaged is damaged")
	require.Contains(t, errOut, "itemopsruns cmd-damaged/b.b1: damaged key data")
	require.Contains(t, errOut, "itemopschunks cmd-damaged/notes: not a name the store gives")
	require.Contains(t, errOut, "itemopschunks cmd-damaged/"+leftover.GetName())
	require.Contains(t, errOut, "a sweep deletes it")
	after, err := runs.Get(ctx, "b.b1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, edited.GetResourceVersion(), after.GetResourceVersion(), "check changed the damaged run's object")
	_, err = chunks.Get(ctx, "notes", metav1.GetOptions{})
	require.NoError(t, err, "check deleted the object the store did not name")
	_, err = chunks.Get(ctx, leftover.GetName(), metav1.GetOptions{})
	require.NoError(t, err, "check deleted the chunk a commit left behind")
}
