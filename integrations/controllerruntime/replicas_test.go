package controllerruntime

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// takerStore is a memstore that is an operations.ClaimTaker whose claims are all
// granted: it records, in order, its takeovers and the Progress calls of the Monitor's
// plugin (see events).
type takerStore struct {
	*memstore.Store
	mu     sync.Mutex // guards events
	events []string
}

func (s *takerStore) record(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

func (s *takerStore) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

func (s *takerStore) ClaimRun(context.Context, operations.Owner) (func(), bool, error) {
	return func() {}, true, nil
}

func (s *takerStore) KeepClaims(context.Context, time.Duration, func()) operations.ClaimSession {
	return grantingSession{s}
}

func (s *takerStore) TakeOverClaims(context.Context) (int, error) {
	s.record("TakeOverClaims")
	return 1, nil
}

type grantingSession struct{ s *takerStore }

func (g grantingSession) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return g.s.ClaimRun(ctx, o)
}
func (grantingSession) EndPass(int) error  { return nil }
func (grantingSession) EndIncompletePass() {}
func (grantingSession) End()               {}

// progressRecorder is a plugin whose operations never end; it records each call in its
// store's events.
type progressRecorder struct{ s *takerStore }

func (p progressRecorder) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	p.s.record("Progress")
	return operations.Progress{}, nil
}

func (progressRecorder) Cancel(context.Context, operations.Operation) error { return nil }

// TestReplicaModels runs a Monitor in a manager with leader election, in each replica
// model, over a store that is an operations.ClaimTaker and holds one waiting run. By
// default the Monitor waits for the manager's election, then takes over the other
// replicas' claims, once, before its first poll, and logs it. With WithSharedClaims it
// polls while another holds the leader Lease, and takes nothing over.
func TestReplicaModels(t *testing.T) {
	cfg := kube.Config(t)
	for _, tc := range []struct {
		name   string
		shared bool
	}{
		{"leader election", false},
		{"shared claims", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			kc, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			ns, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "replicas-"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			const leaseName = "itemops-replicas"
			if tc.shared {
				// Another replica leads, for an hour: this manager is never elected.
				other, hour := "another-replica", int32(3600)
				now := metav1.NewMicroTime(time.Now())
				_, err := kc.CoordinationV1().Leases(ns.Name).Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: leaseName},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &hour,
						AcquireTime: &now, RenewTime: &now},
				}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			store := &takerStore{Store: memstore.New()}
			o := operations.Owner{Kind: phase.Backup, Name: "replicas", UID: "uid"}
			r := operations.Run{Owner: o, Phase: phase.New, Created: time.Now()}
			require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "seeded", time.Now()))
			require.NoError(t, store.CreateRun(ctx, r))
			require.NoError(t, store.PutOperations(ctx, o, []operations.Operation{{Owner: o, Action: "p", ID: "op",
				Status: operations.Status{Phase: operations.OperationNew, Created: time.Now()}}}))

			var logMu sync.Mutex
			var logged []string
			mgr, err := manager.New(cfg, manager.Options{
				Logger: funcr.New(func(prefix, args string) {
					logMu.Lock()
					defer logMu.Unlock()
					logged = append(logged, prefix+" "+args)
				}, funcr.Options{}),
				Metrics:                 metricsserver.Options{BindAddress: "0"},
				LeaderElection:          true,
				LeaderElectionNamespace: ns.Name,
				LeaderElectionID:        leaseName,
				LeaseDuration:           &leaseDuration,
				RenewDeadline:           &leaseRenew,
				RetryPeriod:             &leaseRetry,
			})
			require.NoError(t, err)
			opts := []Option{WithRegistry(nil), WithMonitorOptions(monitor.WithInterval(100 * time.Millisecond))}
			if tc.shared {
				opts = append(opts, WithSharedClaims())
			}
			plugins := operations.ResolverFunc(func(string) (operations.Tracker, error) { return progressRecorder{store}, nil })
			_, err = New(mgr, store, plugins, opts...)
			require.NoError(t, err)
			stop := runManager(t, mgr)
			defer stop()
			require.Eventually(t, func() bool { return len(store.recorded()) >= 3 }, time.Minute, 10*time.Millisecond,
				"the Monitor polled")
			stop()

			events := store.recorded()
			if tc.shared {
				require.NotContains(t, events, "TakeOverClaims", "a Monitor with shared claims took over")
				select {
				case <-mgr.Elected():
					t.Fatal("the manager was elected, though another replica holds the Lease")
				default:
				}
				return
			}
			require.Equal(t, "TakeOverClaims", events[0], "the leader's first event")
			require.NotContains(t, events[1:], "TakeOverClaims", "the leader took over more than once")
			logMu.Lock()
			defer logMu.Unlock()
			took := 0
			for _, l := range logged {
				if strings.Contains(l, "took over the claims of other replicas") && strings.Contains(l, `"sessionsEnded"=1`) {
					took++
				}
			}
			require.Equal(t, 1, took, "takeovers logged at Info, with the sessions ended: %q", logged)
		})
	}
}

// WithSharedClaims over a store that has no claims would have every replica poll every
// run: New refuses it.
func TestSharedClaimsNeedClaims(t *testing.T) {
	mgr, err := manager.New(kube.Config(t), manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	_, err = New(mgr, memstore.New(), operations.ResolverFunc(func(string) (operations.Tracker, error) { return nil, nil }),
		WithRegistry(nil), WithSharedClaims())
	require.ErrorIs(t, err, operations.ErrInvalid)
}
