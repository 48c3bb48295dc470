package controllerruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// at returns the time t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func mtime(d time.Duration) *metav1.Time { return statusTime(at(d)) }

// TestRunStatusOperations: which operations the status shows, and what of them.
func TestRunStatusOperations(t *testing.T) {
	run := runThrough(t, phase.InProgress, phase.WaitingForPluginOperations) // last phase change at t0+2m
	op := func(id string, p operations.OperationPhase, done, total int64, updated time.Duration) operations.Operation {
		o := operations.Operation{ID: id, Action: "example.io/upload",
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: id},
			Status: operations.Status{Phase: p, NCompleted: done, NTotal: total, OperationUnits: "bytes",
				Description: "uploading", Created: t0}}
		if updated != 0 {
			o.Status.Updated = at(updated)
		}
		return o
	}
	retried := func(o operations.Operation, since time.Duration, err string) operations.Operation {
		o.Monitor = operations.MonitorState{Attempts: 2, ErrorSince: at(since), LastError: err}
		return o
	}
	tests := []struct {
		name             string
		ops              []operations.Operation
		slowest, failing string // IDs; "" for none
		failingError     string
		last             *metav1.Time
	}{
		{name: "least share done", ops: []operations.Operation{op("a", operations.OperationInProgress, 50, 100, 3*time.Minute),
			op("b", operations.OperationInProgress, 1, 10, 4*time.Minute), op("c", operations.OperationCompleted, 10, 10, 5*time.Minute)},
			slowest: "b", last: mtime(5 * time.Minute)},
		{name: "no total is not begun", ops: []operations.Operation{op("a", operations.OperationInProgress, 1, 10, 3*time.Minute),
			op("b", operations.OperationNew, 0, 0, 0)},
			slowest: "b", last: mtime(3 * time.Minute)},
		{name: "as far along: moved longest ago", ops: []operations.Operation{op("a", operations.OperationInProgress, 5, 10, 4*time.Minute),
			op("b", operations.OperationInProgress, 1, 2, 3*time.Minute)},
			slowest: "b", last: mtime(4 * time.Minute)},
		{name: "first failed", ops: []operations.Operation{op("a", operations.OperationCompleted, 1, 1, 3*time.Minute),
			func() operations.Operation {
				o := op("b", operations.OperationFailed, 0, 1, 3*time.Minute)
				o.Status.Error = "disk full"
				return o
			}(),
			func() operations.Operation {
				o := op("c", operations.OperationFailed, 0, 1, 3*time.Minute)
				o.Status.Error = "gone"
				return o
			}()},
			failing: "b", failingError: "disk full", last: mtime(3 * time.Minute)},
		{name: "failed before retried", ops: []operations.Operation{retried(op("a", operations.OperationInProgress, 1, 2, 3*time.Minute), time.Minute, "unavailable"),
			func() operations.Operation {
				o := op("b", operations.OperationFailed, 0, 1, 3*time.Minute)
				o.Status.Error = "disk full"
				return o
			}()},
			slowest: "a", failing: "b", failingError: "disk full", last: mtime(3 * time.Minute)},
		{name: "retried the longest", ops: []operations.Operation{retried(op("a", operations.OperationInProgress, 1, 2, 3*time.Minute), 2*time.Minute, "unavailable"),
			retried(op("b", operations.OperationInProgress, 9, 10, 3*time.Minute), time.Minute, "timeout")},
			slowest: "a", failing: "b", failingError: "timeout", last: mtime(3 * time.Minute)},
		{name: "phase change latest", ops: []operations.Operation{op("a", operations.OperationNew, 0, 0, 0)},
			slowest: "a", last: mtime(2 * time.Minute)},
		{name: "none", last: mtime(2 * time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s RunStatus
			s.Set(run, tc.ops, 1)
			id := func(o *OperationStatus) string {
				if o == nil {
					return ""
				}
				return o.ID
			}
			require.Equal(t, tc.slowest, id(s.SlowestOperation), "slowest")
			require.Equal(t, tc.failing, id(s.FailedOperation), "failed")
			if s.FailedOperation != nil {
				require.Equal(t, tc.failingError, s.FailedOperation.Error)
			}
			if diff := cmp.Diff(tc.last, s.LastProgressTime); diff != "" {
				t.Errorf("LastProgressTime (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("what an operation shows", func(t *testing.T) {
		var s RunStatus
		o := op("a", operations.OperationInProgress, 3, 8, 3*time.Minute+500*time.Millisecond)
		s.Set(run, []operations.Operation{o}, 1)
		want := &OperationStatus{ID: "a", Action: "example.io/upload", Resource: "persistentvolumeclaims shop/a", Phase: "InProgress",
			NCompleted: 3, NTotal: 8, OperationUnits: "bytes", Description: "uploading", LastProgressTime: mtime(3 * time.Minute)}
		if diff := cmp.Diff(want, s.SlowestOperation); diff != "" {
			t.Errorf("SlowestOperation (-want +got):\n%s", diff)
		}
	})

	t.Run("never goes back", func(t *testing.T) {
		var s RunStatus
		s.Set(run, []operations.Operation{op("a", operations.OperationInProgress, 3, 8, 9*time.Minute)}, 1)
		s.Set(run, nil, 1) // the run as read later: its operation no longer shown
		require.Equal(t, mtime(9*time.Minute), s.LastProgressTime)
	})
}

// TestRunStatusBounds: whatever a plugin reports, each text of an operation is cut to
// 1,024 bytes, at a rune's boundary, and the status stays a few kilobytes; cut texts
// end in "…".
func TestRunStatusBounds(t *testing.T) {
	long := strings.Repeat("é", 40_000) // 80,000 bytes, two to a rune
	o := operations.Operation{ID: "x" + long, Action: "a" + long, Resource: operations.ResourceIdentifier{Resource: "r", Name: long},
		Status:  operations.Status{Phase: operations.OperationInProgress, OperationUnits: long, Description: long, Created: t0},
		Monitor: operations.MonitorState{Attempts: 1, ErrorSince: t0, LastError: long}}
	failed := o
	failed.Status.Phase, failed.Status.Error = operations.OperationFailed, long
	var s RunStatus
	s.Set(runThrough(t, phase.InProgress, phase.WaitingForPluginOperations), []operations.Operation{o, failed}, 1)
	for _, os := range []*OperationStatus{s.SlowestOperation, s.FailedOperation} {
		require.NotNil(t, os)
		for name, text := range map[string]string{"id": os.ID, "action": os.Action, "resource": os.Resource,
			"units": os.OperationUnits, "description": os.Description, "error": os.Error} {
			require.LessOrEqual(t, len(text), maxStatusText, name)
			require.True(t, utf8.ValidString(text), name)
			require.True(t, strings.HasSuffix(text, "…"), name)
		}
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.Less(t, len(b), 16<<10, "the status's JSON")
}

// listCounter is a memstore that counts the operations its ListOperations and
// CountOperations calls return.
type listCounter struct {
	*memstore.Store
	mu              sync.Mutex
	listed, counted int
}

func (l *listCounter) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	ops, err := l.Store.ListOperations(ctx, o, f)
	l.mu.Lock()
	l.listed += len(ops)
	l.mu.Unlock()
	return ops, err
}

func (l *listCounter) CountOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) (operations.OperationCounts, []operations.Operation, error) {
	c, ops, err := l.Store.CountOperations(ctx, o, f)
	l.mu.Lock()
	l.counted += len(ops)
	l.mu.Unlock()
	return c, ops, err
}

// TestSetFromStoreReadsLess: on a store that counts operations, SetFromStore reads the
// unfinished and failed operations of a run of 10,000, not the completed ones, and
// sets the status Set sets from all of them. On a store that does not count, it reads
// them all, to the same status.
func TestSetFromStoreReadsLess(t *testing.T) {
	ctx := context.Background()
	store := &listCounter{Store: memstore.New()}
	o := operations.Owner{Kind: phase.Backup, Name: "shop/big", UID: "u1"}
	ops := make([]operations.Operation, 10_000)
	for i := range ops {
		ops[i] = operations.Operation{Owner: o, ID: fmt.Sprintf("op-%05d", i), Action: "example.io/upload",
			Status: operations.Status{Phase: operations.OperationCompleted, NCompleted: 10, NTotal: 10, Created: t0, Updated: at(time.Minute)}}
		switch {
		case i%100 == 7:
			ops[i].Status = operations.Status{Phase: operations.OperationInProgress, NCompleted: int64(i % 9), NTotal: 10, Created: t0, Updated: at(2 * time.Minute)}
		case i == 4242:
			ops[i].Status.Phase, ops[i].Status.Error = operations.OperationFailed, "disk full"
		}
	}
	run := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, run.SetPhase(phase.InProgress, "main run started", t0))
	require.NoError(t, run.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
	require.NoError(t, store.CreateRunWithOperations(ctx, run, ops))

	var want RunStatus
	want.Set(run, ops, 1)
	require.Equal(t, 10_000, want.Operations)
	require.Equal(t, 9_899, want.OperationsCompleted)
	require.Equal(t, 1, want.OperationsFailed)
	require.Equal(t, "op-04242", want.FailedOperation.ID)

	var got RunStatus
	_, changed, err := got.SetFromStore(ctx, store, o, 1)
	require.NoError(t, err)
	require.True(t, changed)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SetFromStore (-Set of every operation +got):\n%s", diff)
	}
	require.Equal(t, 101, store.counted, "operations read with the counts: the unfinished and the failed")
	require.Zero(t, store.listed, "operations listed apart")

	var all RunStatus
	_, _, err = all.SetFromStore(ctx, onlyStore{store.Store}, o, 1)
	require.NoError(t, err)
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("SetFromStore on a store that does not count (-Set of every operation +got):\n%s", diff)
	}
}

// onlyStore hides every ability of a store but the Store contract.
type onlyStore struct{ operations.Store }

// TestSourceCoalescesProgress: a change of progress only is enqueued at once when the
// object's last request is an interval old, and otherwise left for a request due at
// the interval's end; a phase change, an operation that ended, and a blocked run are
// enqueued at once. With no interval, every change is. Nothing waits for the interval:
// it is an hour, and what is due then is checked as not enqueued yet.
func TestSourceCoalescesProgress(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "shop/nightly"}
	waiting := phase.WaitingForPluginOperations
	progress := monitor.RunChange{Owner: o, From: waiting, To: waiting, Running: 2, Progressed: true}
	ended := monitor.RunChange{Owner: o, From: waiting, To: waiting, Running: 1, Completed: 1}
	moved := monitor.RunChange{Owner: o, From: waiting, To: phase.Finalizing}
	blocked := monitor.RunChange{Owner: o}

	for _, tc := range []struct {
		name    string
		every   time.Duration
		changes []monitor.RunChange
		want    []bool // whether each change finds the object enqueued at once
	}{
		{"an hour", time.Hour,
			[]monitor.RunChange{progress, progress, progress, ended, progress, moved, blocked, progress},
			[]bool{true, false, false, true, false, true, true, false}},
		{"none", 0,
			[]monitor.RunChange{progress, progress, ended, progress},
			[]bool{true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := newMonitor(memstore.New(), operationstest.Resolver(nil), logr.Discard(), nil)
			m.progressEvery = tc.every
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			require.NoError(t, m.Source(Kind{Name: phase.Backup}).Start(ctx, q))
			for i, c := range tc.changes {
				m.enqueue(c)
				require.Equal(t, tc.want[i], q.Len() == 1, "change %d (%+v) enqueued at once", i, c)
				if q.Len() == 1 {
					req, _ := q.Get()
					q.Done(req)
				}
			}
		})
	}

	t.Run("a run that ended is forgotten", func(t *testing.T) {
		m := newMonitor(memstore.New(), operationstest.Resolver(nil), logr.Discard(), nil)
		m.progressEvery = time.Hour
		m.enqueue(progress)
		require.Len(t, m.shown, 1)
		m.enqueue(monitor.RunChange{Owner: o, From: phase.Finalizing, To: phase.Completed})
		require.Empty(t, m.shown)
		m.enqueue(progress)
		m.forgetShown(time.Now().Add(time.Hour))
		require.Empty(t, m.shown, "forgotten once its interval passed")
	})
}

// TestNewProgressInterval: New's Monitor coalesces progress over DefaultProgressInterval,
// and over what WithProgressInterval gives, a negative interval meaning none.
func TestNewProgressInterval(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		opts []Option
		want time.Duration
	}{
		{nil, DefaultProgressInterval},
		{[]Option{WithProgressInterval(time.Minute)}, time.Minute},
		{[]Option{WithProgressInterval(-time.Second)}, 0},
	} {
		m, err := New(mgr, memstore.New(), operationstest.Resolver(nil), append(tc.opts, WithRegistry(nil), WithName(fmt.Sprint(tc.want)))...)
		require.NoError(t, err)
		require.Equal(t, tc.want, m.progressEvery)
	}
}
