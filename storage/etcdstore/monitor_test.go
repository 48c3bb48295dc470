package etcdstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

var bg = context.Background()

// twice is a plugin whose operations complete on their second Progress call. onCall,
// when set, runs inside every call.
type twice struct {
	mu     sync.Mutex
	calls  map[string]int // Progress calls per operation (run/id)
	onCall func()
}

func (tr *twice) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	tr.mu.Lock()
	tr.calls[op.Owner.String()+"/"+op.ID]++
	n := tr.calls[op.Owner.String()+"/"+op.ID]
	tr.mu.Unlock()
	if tr.onCall != nil {
		tr.onCall()
	}
	p := operations.Progress{NCompleted: 1, NTotal: 2, OperationUnits: "Bytes", Started: time.Unix(1e9, 0)}
	if n >= 2 {
		p.Completed, p.NCompleted = true, 2
	}
	return p, nil
}

func (*twice) Cancel(context.Context, operations.Operation) error { return nil }

// seed creates runs waiting for perRun New operations each.
func seed(t *testing.T, s operations.Store, runs, perRun int) []operations.Owner {
	t.Helper()
	return seedIn(t, s, runs, perRun, operations.OperationNew)
}

// seedIn creates runs waiting for perRun operations each, in phase p (InProgress ones
// started long ago).
func seedIn(t *testing.T, s operations.Store, runs, perRun int, p operations.OperationPhase) []operations.Owner {
	t.Helper()
	owners := make([]operations.Owner, runs)
	for i := range owners {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%02d", i), UID: fmt.Sprint("uid-", i)}
		r := operations.Run{Owner: o, Phase: phase.New}
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "seeded", time.Now()))
		require.NoError(t, s.CreateRun(bg, r))
		ops := make([]operations.Operation, perRun)
		for j := range ops {
			ops[j] = operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("op-%03d", j),
				Status: operations.Status{Phase: p, Created: time.Now()}}
			if p == operations.OperationInProgress {
				ops[j].Status.Started = time.Unix(1e9, 0)
			}
		}
		require.NoError(t, s.PutOperations(bg, o, ops))
		owners[i] = o
	}
	return owners
}

// waitCompleted waits until every run of owners is Completed, or fails the test.
func waitCompleted(t *testing.T, s operations.Store, owners []operations.Owner) {
	t.Helper()
	require.Eventually(t, func() bool {
		runs, err := s.ListRuns(bg, operations.RunFilter{Phases: []phase.Phase{phase.Completed}})
		return err == nil && len(runs) == len(owners)
	}, 3*time.Minute, 50*time.Millisecond, "every run Completed")
}

// checkFinished checks that every operation of owners completed and that every run went
// through each phase once: nothing was lost, nothing advanced twice.
func checkFinished(t *testing.T, s operations.Store, owners []operations.Owner, perRun int) {
	t.Helper()
	want := []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}
	for _, o := range owners {
		r, err := s.GetRun(bg, o)
		require.NoError(t, err)
		var got []phase.Phase
		for _, h := range r.History {
			got = append(got, h.To)
		}
		require.Equal(t, want, got, "phases %s entered, in order", o)
		require.Zero(t, r.Errors, "errors of %s", o)
		done, err := s.ListOperations(bg, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationCompleted}})
		require.NoError(t, err)
		require.Len(t, done, perRun, "completed operations of %s", o)
	}
}

// TestMonitorSurvivesRestart stops etcd in the middle of a pass, while the Monitor calls
// plugins, and starts it again on the same ports with the same data. The pass fails with
// ErrUnavailable, nothing it had not written is lost, and the Monitor finishes.
func TestMonitorSurvivesRestart(t *testing.T) {
	const runs, perRun = 5, 20
	srv := etcdstore.StartServer(t)
	s := etcdstore.OpenStore(t, etcdstore.NewClient(t, srv), etcdstore.NewPrefix(), &etcdstore.Options{RequestTimeout: 300 * time.Millisecond})
	owners := seed(t, s, runs, perRun)

	down := newRestartMidPass()
	tr := &twice{calls: make(map[string]int), onCall: down.hold}
	resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil })
	m := monitor.New(s, resolver, monitor.WithInterval(20*time.Millisecond), down.observer())
	ctx, cancel := context.WithCancel(bg)
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()
	down.run(t, srv)

	waitCompleted(t, s, owners)
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)
	checkFinished(t, s, owners, perRun)
}

// A restartMidPass stops an etcd server while a Monitor's pass calls a plugin, and
// starts it again once a pass has failed for it.
type restartMidPass struct {
	midPass, resume chan struct{}
	gate            sync.Once
	failures        chan error
}

func newRestartMidPass() *restartMidPass {
	return &restartMidPass{midPass: make(chan struct{}), resume: make(chan struct{}), failures: make(chan error, 100)}
}

// hold is for the plugin to call on each call: the first waits until etcd is down.
func (r *restartMidPass) hold() {
	r.gate.Do(func() {
		close(r.midPass)
		<-r.resume
	})
}

// observer is the Monitor's option that collects the errors of failed passes.
func (r *restartMidPass) observer() monitor.Option {
	return monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) {
		if st.Err != nil {
			select {
			case r.failures <- st.Err:
			default:
			}
		}
	}})
}

// run waits for the first plugin call, stops srv, lets the call return, checks that the
// pass fails with ErrUnavailable, and starts srv again on the same ports and data.
func (r *restartMidPass) run(t *testing.T, srv *etcdtest.Server) {
	t.Helper()
	<-r.midPass
	srv.Stop()
	close(r.resume)
	select {
	case err := <-r.failures:
		require.ErrorIs(t, err, etcdstore.ErrUnavailable, "the pass's error while etcd is down")
		require.ErrorContains(t, err, "etcd unavailable")
	case <-time.After(time.Minute):
		t.Fatal("no pass failed while etcd was down")
	}
	require.NoError(t, srv.Restart())
}
