package controllerruntime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// replicaObjects is how many objects the replica-model tests reconcile.
const replicaObjects = 6

// replicaLog records, per object, the main runs each replica's reconcile ran and the
// replicas whose reconcile reached StartRun. Its methods are safe for concurrent use.
type replicaLog struct {
	mu           sync.Mutex
	mains        map[string][]string // object name → the replicas that ran its main run
	startCallers map[string]map[string]bool
	changed      chan struct{} // receives (without blocking) after each record
}

func newReplicaLog() *replicaLog {
	return &replicaLog{mains: map[string][]string{}, startCallers: map[string]map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (l *replicaLog) startCalled(object, replica string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.startCallers[object] == nil {
		l.startCallers[object] = map[string]bool{}
	}
	l.startCallers[object][replica] = true
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *replicaLog) main(object, replica string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mains[object] = append(l.mains[object], replica)
}

// startCallerCount returns how many replicas' reconciles of object have reached StartRun.
func (l *replicaLog) startCallerCount(object string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.startCallers[object])
}

// replica is one operator process of the tests: a manager whose controller reconciles
// the ConfigMaps of one namespace with HandleDeletion and StartRun, its Monitor over
// the store the replicas share, and the plugin the runs' operations belong to.
type replica struct {
	name string
	mgr  manager.Manager
}

// newReplica builds replica name over store. opts are the manager's options, to which
// it adds the scheme, the logger, the metrics and controller settings a test binary
// of several managers needs. beforeMain, when not nil, is called in each main run
// before it returns, with the object's name.
func newReplica(t *testing.T, name string, opts manager.Options, scheme *runtime.Scheme, c client.Client, ns string,
	store operations.Store, log *replicaLog, beforeMain func(object string)) *replica {
	t.Helper()
	skipNameValidation := true // the tests of this binary start several managers
	opts.Scheme, opts.Logger = scheme, logr.Discard()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	// A reconcile per object at once: a main run that waits for the other replica's
	// reconcile of its object must not hold up this replica's reconciles of the others.
	opts.Controller = ctrlconfig.Controller{SkipNameValidation: &skipNameValidation, MaxConcurrentReconciles: replicaObjects}
	mgr, err := manager.New(kube.Config(t), opts)
	require.NoError(t, err)
	tracker := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: true}, nil
	}}
	mopts := []Option{WithRegistry(nil), WithMonitorOptions(monitor.WithInterval(50 * time.Millisecond))}
	if !opts.LeaderElection {
		mopts = append(mopts, WithSharedClaims()) // the model of replicas without leader election
	}
	m, err := New(mgr, store, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}), mopts...)
	require.NoError(t, err)
	kind := Kind{Name: phase.Backup}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Namespace != ns {
			return reconcile.Result{}, nil // another test's object
		}
		var obj corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		deleted, err := m.HandleDeletion(ctx, c, &obj, kind)
		if apierrors.IsConflict(err) {
			// The other replica added the finalizer first: its update brings a reconcile.
			return reconcile.Result{Requeue: true}, nil
		}
		if deleted || err != nil {
			return reconcile.Result{}, err
		}
		log.startCalled(obj.Name, name)
		main := func(context.Context) (operations.MainRun, error) {
			log.main(obj.Name, name)
			if beforeMain != nil {
				beforeMain(obj.Name)
			}
			return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "upload-" + string(obj.UID)}}}, nil
		}
		_, err = m.StartRun(ctx, kind.Run(&obj), main)
		return reconcile.Result{}, err
	})
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("replicas").For(&corev1.ConfigMap{}).
		WatchesRawSource(m.Source(kind)).Complete(Gate(m, r)))
	return &replica{name: name, mgr: mgr}
}

// createObjects creates the test's objects in ns and returns their names.
func createObjects(t *testing.T, c client.Client, ns string) []string {
	t.Helper()
	var names []string
	for i := range replicaObjects {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("object-%d", i)}}
		require.NoError(t, c.Create(context.Background(), obj))
		names = append(names, obj.Name)
	}
	return names
}

// waitCompleted waits until the run of every object is Completed, failing the test as
// soon as one ends otherwise, or after two minutes (a guard against hanging) with the
// phases it saw.
func waitCompleted(t *testing.T, store operations.Store, ns string, names []string) {
	t.Helper()
	var last map[string]phase.Phase
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		last = map[string]phase.Phase{}
		done := true
		for _, n := range names {
			r, err := store.GetRun(context.Background(), operations.Owner{Kind: phase.Backup, Name: ns + "/" + n})
			if err == nil {
				last[n] = r.Phase
			}
			if err != nil || r.Phase != phase.Completed {
				done = false
			}
			if err == nil && phase.IsTerminal(r.Phase) && r.Phase != phase.Completed {
				t.Fatalf("the run of %s ended %s: %s", n, r.Phase, r.FailureReason)
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runs did not all end Completed within two minutes: %v", last)
		}
	}
}

// TestAPIServerReplicasWithoutLeaderElection is the model of shared claims: two
// replicas (two managers, without leader election) over one store with claims, so that
// both reconcile every object and both Monitors run. Each main run waits until the
// other replica's reconcile of its object has reached StartRun too, so that both
// replicas start every run while its main run is under way: the main run of each
// object runs exactly once, on one replica, and every run ends Completed. Replica b
// starts once a's main runs are under way, and applies the restart rules (Recover)
// while they are: it leaves their InProgress runs alone, since their main runs hold the
// runs' claims. Without the conditional create that guards the main run, both replicas
// run it for every object; without Recover's claim, b fails the runs of a's main runs.
func TestAPIServerReplicasWithoutLeaderElection(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	names := createObjects(t, c, ns)
	store := newClaimStore()
	log := newReplicaLog()
	// The main run of an object waits, within a guard against hanging, until both
	// replicas' reconciles of the object have reached StartRun.
	bothStarted := func(object string) {
		for deadline := time.Now().Add(30 * time.Second); log.startCallerCount(object) < 2 && time.Now().Before(deadline); {
			select {
			case <-log.changed:
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	a := newReplica(t, "a", manager.Options{}, scheme, c, ns, store, log, bothStarted)
	b := newReplica(t, "b", manager.Options{}, scheme, c, ns, store, log, bothStarted)
	stopA := runManager(t, a.mgr)
	defer stopA()
	// b starts once a's main runs are under way, so that b's Recover finds their runs
	// InProgress.
	require.Eventually(t, func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.mains) > 0
	}, time.Minute, 10*time.Millisecond, "no main run of replica a within a minute")
	stopB := runManager(t, b.mgr)
	defer stopB()

	waitCompleted(t, store, ns, names)
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, n := range names {
		require.Len(t, log.mains[n], 1, "the main runs of %s, by replica", n)
		require.Len(t, log.startCallers[n], 2, "the replicas whose reconcile of %s reached StartRun", n)
	}
}

// TestLeaderElectionReplicasMainRunsOnce is the model of leader election: two replicas
// (two managers with leader election on one Lease) over one store; only the elected
// leader reconciles and runs its Monitor. The main run of each object runs exactly
// once, on the leader, the standby's reconciler never runs, and every run ends
// Completed.
func TestLeaderElectionReplicasMainRunsOnce(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	names := createObjects(t, c, ns)
	store := newClaimStore()
	log := newReplicaLog()
	opts := manager.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: ns,
		LeaderElectionID:        "itemops-replicas",
		LeaseDuration:           &leaseDuration,
		RenewDeadline:           &leaseRenew,
		RetryPeriod:             &leaseRetry,
	}
	a := newReplica(t, "a", opts, scheme, c, ns, store, log, nil)
	b := newReplica(t, "b", opts, scheme, c, ns, store, log, nil)
	stopA := runManager(t, a.mgr)
	defer stopA()
	waitClosed(t, a.mgr.Elected(), "manager a elected")
	stopB := runManager(t, b.mgr)
	defer stopB()

	waitCompleted(t, store, ns, names)
	select {
	case <-b.mgr.Elected():
		t.Fatal("manager b was elected while manager a leads")
	default:
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, n := range names {
		require.Equal(t, []string{"a"}, log.mains[n], "the main runs of %s, by replica", n)
		require.Equal(t, map[string]bool{"a": true}, log.startCallers[n], "the replicas whose reconcile of %s reached StartRun", n)
	}
}
