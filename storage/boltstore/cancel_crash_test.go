package boltstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// The cancel crash test runs a Monitor that honours a cancel request in a child process,
// which TestMain sends to cancelChild when these variables are set.
const (
	envCancelPath  = "ITEMOPS_BOLTSTORE_CANCEL_PATH"  // the store file
	envCancelStuck = "ITEMOPS_BOLTSTORE_CANCEL_STUCK" // where the child stops: a Cancel call, or beforeRunUpdate
)

const (
	cancelOps    = 200
	cancelReason = "jane: the wrong namespaces"
	// beforeRunUpdate, as envCancelStuck, stops the child after the pass wrote the
	// operations, before it moves the run to Failed.
	beforeRunUpdate = -1
)

var cancelOwner = operations.Owner{Kind: phase.Restore, Name: "r", UID: "u-r"}

// cancelChild creates a restore waiting for cancelOps operations, requests its cancel,
// prints "requested" once the request is stored, and runs a Monitor pass that cancels the
// operations. When envCancelStuck is n > 0, the nth Cancel call prints "stuck" and never
// returns, so the pass never writes; when it is beforeRunUpdate, the pass prints "stuck"
// and stops before its update of the run. It then waits to be killed.
func cancelChild() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "cancel child: "+format+"\n", args...)
		return 2
	}
	stuck, err := strconv.ParseInt(os.Getenv(envCancelStuck), 10, 64)
	if err != nil {
		return fail("stuck: %v", err)
	}
	s, err := Open(os.Getenv(envCancelPath), &Options{Timeout: 10 * time.Second})
	if err != nil {
		return fail("open: %v", err)
	}
	ctx := context.Background()
	now := time.Now()
	r := operations.Run{Owner: cancelOwner, Phase: phase.New, Created: now}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "main run ended", now); err != nil {
		return fail("%v", err)
	}
	ops := make([]operations.Operation, cancelOps)
	for i := range ops {
		ops[i] = operations.Operation{Owner: cancelOwner, Action: "mover", ID: fmt.Sprintf("op-%03d", i),
			Status: operations.Status{Phase: operations.OperationInProgress, Created: now}}
	}
	if err := s.CreateRunWithOperations(ctx, r, ops); err != nil {
		return fail("create: %v", err)
	}
	if _, err := operations.RequestCancel(ctx, s, cancelOwner, cancelReason, now); err != nil {
		return fail("request: %v", err)
	}
	fmt.Println("requested")
	var calls atomic.Int64
	tr := &operationstest.Tracker{CancelFunc: func(ctx context.Context, _ operations.Operation) error {
		if calls.Add(1) == stuck {
			fmt.Println("stuck")
			select {}
		}
		time.Sleep(100 * time.Microsecond)
		return nil
	}}
	var monitored operations.Store = s
	if stuck == beforeRunUpdate {
		monitored = stopBeforeUpdate{s}
	}
	m := monitor.New(monitored, operationstest.Resolver(map[string]operations.Tracker{"mover": tr}),
		monitor.WithWorkers(4), monitor.WithCallTimeout(time.Hour))
	if _, err := m.RunOnce(ctx); err != nil {
		return fail("pass: %v", err)
	}
	fmt.Println("done")
	select {}
}

// stopBeforeUpdate is a Store whose UpdateRun prints "stuck" and never returns.
type stopBeforeUpdate struct{ operations.Store }

func (stopBeforeUpdate) UpdateRun(context.Context, operations.Owner, func(*operations.Run) error) (operations.Run, error) {
	fmt.Println("stuck")
	select {}
}

// runCancelChild starts a cancel child on path and kills it with SIGKILL: once it is
// stuck when stuck is not 0, else after a random delay from its request. It fails t unless the
// child was killed after it stored the request.
func runCancelChild(t *testing.T, path string, stuck int, r *rand.Rand) {
	t.Helper()
	cmd, lines, stderr := startChild(t, envCancelPath+"="+path, envCancelStuck+"="+strconv.Itoa(stuck))
	want := map[bool]string{true: "stuck", false: "requested"}[stuck != 0]
	guard := time.NewTimer(2 * time.Minute)
	defer guard.Stop()
	for seen := false; !seen; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended before %q; stderr:\n%s", want, stderr.String())
			}
			seen = line == want
		case <-guard.C:
			_ = cmd.Process.Kill()
			t.Fatalf("the child printed no %q in 2 minutes; stderr:\n%s", want, stderr.String())
		}
	}
	if stuck == 0 {
		time.Sleep(time.Duration(r.Int64N(int64(50 * time.Millisecond))))
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for range lines {
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the child's end: %v; stderr:\n%s", err, stderr.String())
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child was not killed: %v; stderr:\n%s", err, stderr.String())
}

// TestCancelSurvivesKill requests the cancel of a run in a child process and kills the
// child while its Monitor honours it: in one round of three while a Cancel call is under
// way (so before anything was written), in one after the pass wrote the operations and
// before it updated the run, and in the third at a random moment. It then resumes in a
// new process's place: the request is still there, and the next Monitor completes the
// cancel, calling Cancel once for each operation the killed one had not written. It
// makes 12 rounds, or 6 under -short (two of each kind).
func TestCancelSurvivesKill(t *testing.T) {
	t.Parallel()
	rounds := 12
	if testing.Short() {
		rounds = 6
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	ctx := context.Background()
	for i := range rounds {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("round-%d.db", i))
		stuck := 0
		switch i % 3 {
		case 0:
			stuck = 1 + r.IntN(cancelOps)
		case 1:
			stuck = beforeRunUpdate
		}
		runCancelChild(t, path, stuck, r)

		s, err := Open(path, &Options{Timeout: 10 * time.Second})
		require.NoError(t, err, "round %d: reopen after the kill", i)
		run, err := s.GetRun(ctx, cancelOwner)
		require.NoError(t, err)
		require.Equal(t, cancelReason, run.Cancel.Reason, "round %d: the request survived the kill", i)
		require.Contains(t, eventsOf(run), operations.EventCancelRequested, "round %d: history", i)
		left, err := s.ListOperations(ctx, cancelOwner, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationInProgress}})
		require.NoError(t, err)
		switch {
		case stuck > 0:
			require.Len(t, left, cancelOps, "round %d: the pass was killed before it wrote", i)
		case stuck == beforeRunUpdate:
			require.Empty(t, left, "round %d: the pass wrote every operation before it was killed", i)
			require.Equal(t, phase.WaitingForPluginOperations, run.Phase, "round %d: the run was not yet updated", i)
		}

		atKill := run.Phase
		tr := &operationstest.Tracker{}
		m := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"mover": tr}))
		rec, err := m.Recover(ctx)
		require.NoError(t, err)
		if !phase.IsTerminal(run.Phase) {
			require.Equal(t, []operations.Owner{cancelOwner}, rec.Resumed, "round %d: Recover resumes the waiting run", i)
		}
		_, err = m.RunOnce(ctx)
		require.NoError(t, err)

		run, err = s.GetRun(ctx, cancelOwner)
		require.NoError(t, err)
		require.Equal(t, phase.Failed, run.Phase, "round %d", i)
		require.Equal(t, cancelReason, run.FailureReason, "round %d", i)
		require.Equal(t, cancelOps, run.Errors, "round %d: every cancelled operation counts once", i)
		all, err := s.ListOperations(ctx, cancelOwner, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, all, cancelOps)
		wasLeft := map[string]bool{}
		for _, op := range left {
			wasLeft[op.ID] = true
		}
		for _, op := range all {
			require.Equal(t, operations.OperationFailed, op.Status.Phase, "round %d: %s", i, op.ID)
			require.True(t, strings.HasPrefix(op.Status.Error, monitor.CanceledPrefix+cancelReason), "round %d: %s: %q", i, op.ID, op.Status.Error)
			want := 0
			if wasLeft[op.ID] {
				want = 1
			}
			require.Equal(t, want, tr.CancelCalls(op.ID), "round %d: Cancel calls of %s after the restart", i, op.ID)
		}
		require.NoError(t, s.Close())
		t.Logf("round %d: stuck at call %d, %d operations left at the kill, run %s at the kill", i, stuck, len(left), atKill)
	}
}

func eventsOf(r operations.Run) []phase.Event {
	out := make([]phase.Event, len(r.History))
	for i, h := range r.History {
		out[i] = h.Event
	}
	return out
}
