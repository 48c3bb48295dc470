package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/itemops/itemops/storage/memstore"
)

// claimStore is a memstore whose claims work as those of one kubestore Store do: a
// claim session (the Monitor's Run) keeps its claims from pass to pass, the store's own
// ClaimRun (Poll's, outside a pass) borrows a claim the session keeps when no pass uses
// it, and a claim in use, a pass polling the run, is refused. refused is told of each
// ClaimRun of the store that was refused.
type claimStore struct {
	*memstore.Store
	mu      sync.Mutex
	inUse   map[string]bool
	refused chan operations.Owner
}

var _ operations.ClaimKeeper = (*claimStore)(nil)

func newClaimStore() *claimStore {
	return &claimStore{Store: memstore.New(), inUse: map[string]bool{}, refused: make(chan operations.Owner, 100)}
}

func (s *claimStore) ClaimRun(_ context.Context, o operations.Owner) (func(), bool, error) {
	release, ok := s.claim(o)
	if !ok {
		select {
		case s.refused <- o:
		default:
		}
	}
	return release, ok, nil
}

func (s *claimStore) claim(o operations.Owner) (func(), bool) {
	key := fmt.Sprint(o.Kind, "/", o.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse[key] {
		return nil, false
	}
	s.inUse[key] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.inUse, key)
		})
	}, true
}

func (s *claimStore) KeepClaims(context.Context, time.Duration, func()) operations.ClaimSession {
	return claimSession{s}
}

type claimSession struct{ s *claimStore }

func (c claimSession) ClaimRun(_ context.Context, o operations.Owner) (func(), bool, error) {
	release, ok := c.s.claim(o)
	return release, ok, nil
}
func (claimSession) EndPass(int) error  { return nil }
func (claimSession) EndIncompletePass() {}
func (claimSession) End()               {}

// TestAPIServerDeletionWhileOwnPassPolls: an object is deleted while the pass of the
// operator's one Monitor polls its run of 2,000 operations, holding the run's claim.
// The controller's reconcile waits for the pass instead of failing with ErrClaimed ("run
// claimed by another Monitor", which the one Monitor's own pass held): no reconcile
// returns an error, none is logged, every operation is cancelled through its plugin, and
// the object and its run are gone.
func TestAPIServerDeletionWhileOwnPassPolls(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	ctx := context.Background()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}}
	require.NoError(t, c.Create(ctx, obj))

	const n = 2000
	var armed atomic.Bool
	held := make(chan struct{}) // closed when the pass's poll is held inside Progress
	gate := make(chan struct{}) // closed to let it go on
	var holding atomic.Bool     // set by the one Progress call that is held
	var cancelled sync.Map      // operation ID → true
	tracker := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			// Only the first call after armed is held: the pass's other calls go on,
			// so that its workers are not all taken by calls waiting for the gate.
			if armed.Load() && holding.CompareAndSwap(false, true) {
				close(held)
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			return operations.Progress{}, nil
		},
		CancelFunc: func(_ context.Context, op operations.Operation) error {
			cancelled.Store(op.ID, true)
			return nil
		},
	}
	store := newClaimStore()

	var logMu sync.Mutex
	var errorLogs []string
	logger := funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"`) || strings.Contains(args, "claimed") {
			logMu.Lock()
			errorLogs = append(errorLogs, prefix+" "+args)
			logMu.Unlock()
		}
	}, funcr.Options{})
	skipNameValidation := true
	mgr, err := manager.New(kube.Config(t), manager.Options{
		Scheme: scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
	})
	require.NoError(t, err)
	m, err := New(mgr, store, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}),
		// The held Progress call must outlast a slow machine's reconcile: the default
		// call timeout (30 s) would give it up, and the pass would let the claim go.
		WithRegistry(nil), WithMonitorOptions(monitor.WithInterval(20*time.Millisecond), monitor.WithCallTimeout(time.Hour)))
	require.NoError(t, err)

	kind := Kind{Name: phase.Backup}
	var reconcileErrs []error
	var errMu sync.Mutex
	main := func(context.Context) (operations.MainRun, error) {
		var res operations.MainRun
		for i := range n {
			res.Operations = append(res.Operations, operations.Operation{Action: "p", ID: fmt.Sprintf("op-%04d", i)})
		}
		return res, nil
	}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		err := func() error {
			// Only the test's object has a run: the API server makes other ConfigMaps
			// (kube-root-ca.crt in every namespace), whose runs' polls would meet the
			// held call instead of the run's.
			if req.Namespace != ns || req.Name != "big" {
				return nil
			}
			var got corev1.ConfigMap
			if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
				return client.IgnoreNotFound(err)
			}
			if deleted, err := m.HandleDeletion(ctx, c, &got, kind); deleted || err != nil {
				return err
			}
			_, err := m.StartRun(ctx, operations.Run{Owner: OwnerOf(phase.Backup, &got)}, main)
			return err
		}()
		if err != nil {
			errMu.Lock()
			reconcileErrs = append(reconcileErrs, err)
			errMu.Unlock()
		}
		return reconcile.Result{}, err
	})
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("deletions").For(&corev1.ConfigMap{}).
		WatchesRawSource(m.Source(kind)).Complete(Gate(m, r)))
	ctx, stop := context.WithCancel(ctx)
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	defer func() {
		stop()
		require.NoError(t, <-managerDone)
	}()

	guard := func(ch <-chan struct{}, what string) { // a guard against hanging, not a timing
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("no %s within a minute", what)
		}
	}
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			require.False(t, time.Now().After(deadline), "no %s within a minute", what)
		}
	}
	owner := operations.Owner{Kind: phase.Backup, Name: ns + "/big"}
	waitFor("run waiting for its operations", func() bool {
		run, err := store.GetRun(ctx, owner)
		return err == nil && run.Phase == phase.WaitingForPluginOperations
	})
	armed.Store(true)
	guard(held, "pass polling the run")
	// The test's premise: the pass that polls the run holds its claim while the call
	// is held.
	store.mu.Lock()
	inUse := store.inUse[fmt.Sprint(owner.Kind, "/", owner.Name)]
	store.mu.Unlock()
	require.True(t, inUse, "the run's claim is not held while its pass polls it")

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	require.NoError(t, c.Delete(ctx, obj))
	select { // the deletion's reconcile meets the claim the pass holds
	case o := <-store.refused:
		require.Equal(t, owner.Name, o.Name)
	case <-time.After(time.Minute):
		t.Fatal("the deletion's reconcile did not try to claim the run within a minute")
	}
	close(gate)

	waitFor("object gone", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), &corev1.ConfigMap{}))
	})
	_, err = store.GetRun(ctx, owner)
	require.ErrorIs(t, err, operations.ErrNotFound)
	left := 0
	for i := range n {
		if _, ok := cancelled.Load(fmt.Sprintf("op-%04d", i)); !ok {
			left++
		}
	}
	require.Zero(t, left, "operations not cancelled through their plugin")

	errMu.Lock()
	defer errMu.Unlock()
	for _, err := range reconcileErrs {
		require.False(t, errors.Is(err, ErrClaimed), "a reconcile failed with the claim of the Monitor's own pass: %v", err)
	}
	require.Empty(t, reconcileErrs, "reconcile errors")
	logMu.Lock()
	defer logMu.Unlock()
	require.Empty(t, errorLogs, "errors logged")
}
