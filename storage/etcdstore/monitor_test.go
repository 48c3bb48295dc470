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

// recorder is shared by the trackers of several Monitors. An operation completes on its
// second Progress call, whichever Monitor makes it; the recorder notes which Monitor
// polled which run, and any moment two Monitors polled one run at once.
type recorder struct {
	mu        sync.Mutex                // guards the fields below
	calls     map[string]int            // Progress calls per operation (run/id)
	inflight  map[string]map[string]int // run → Monitor → calls in flight
	polled    map[string]map[string]bool
	byMonitor map[string]int
	overlaps  []string
}

func newRecorder() *recorder {
	return &recorder{calls: map[string]int{}, inflight: map[string]map[string]int{}, polled: map[string]map[string]bool{}, byMonitor: map[string]int{}}
}

// tracker is one Monitor's view of the recorder. onCall, when set, runs inside every
// Progress call with the number of calls this Monitor has made.
type tracker struct {
	r      *recorder
	name   string
	onCall func(op operations.Operation, n int)
}

func (tr tracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	r, run := tr.r, op.Owner.String()
	r.mu.Lock()
	for other, n := range r.inflight[run] {
		if other != tr.name && n > 0 {
			r.overlaps = append(r.overlaps, fmt.Sprintf("%s polled %s while %s was polling it", tr.name, run, other))
		}
	}
	if r.inflight[run] == nil {
		r.inflight[run], r.polled[run] = map[string]int{}, map[string]bool{}
	}
	r.inflight[run][tr.name]++
	r.polled[run][tr.name] = true
	r.calls[run+"/"+op.ID]++
	n := r.calls[run+"/"+op.ID]
	r.byMonitor[tr.name]++
	mine := r.byMonitor[tr.name]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight[run][tr.name]--
		r.mu.Unlock()
	}()
	if tr.onCall != nil {
		tr.onCall(op, mine)
	}
	p := operations.Progress{NCompleted: 1, NTotal: 2, OperationUnits: "Bytes", Started: time.Unix(1e9, 0)}
	if n >= 2 {
		p.Completed, p.NCompleted = true, 2
	}
	return p, nil
}

func (tracker) Cancel(context.Context, operations.Operation) error { return nil }

func (tr tracker) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil })
}

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
	tr := tracker{r: newRecorder(), name: "m", onCall: func(operations.Operation, int) { down.hold() }}
	m := monitor.New(s, tr.resolver(), monitor.WithInterval(20*time.Millisecond), down.observer())
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
