package monitor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// errWriteLost is the error of a write that the store decorated by lossyWrites fails.
var errWriteLost = errors.New("write lost")

// lossyWrites returns e's store decorated so that its n-th write of operations
// (PutOperations or CommitPass, counting from 1) fails, when lose(n) says so, without
// reaching the store.
func lossyWrites(e *env, lose func(n int) bool) operations.Store {
	n := 0
	return decorate.Store(e.store, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		if c.Method == "PutOperations" || c.Method == "CommitPass" {
			n++
			if lose(n) {
				return errWriteLost
			}
		}
		return call(ctx)
	})
}

// TestLostWritesKeepCountsTrue checks that the retry count of an operation, and the
// message it fails with, say what happened when the store fails some of the Monitor's
// writes: errors that an answer came between, which a failed write did not record, do
// not count as in a row; and errors in a row count as such though a failed write did not
// record the first of them, or the one that failed the operation. A pass every 10s; each pass's Progress call answers or errs as the
// case says, and each of its writes is lost or made as it says.
func TestLostWritesKeepCountsTrue(t *testing.T) {
	busy := operations.Retryable(errors.New("busy"))
	tests := []struct {
		name        string
		answers     []bool // per pass: the plugin answers (running, or done at the last pass); else busy
		lost        []bool // per pass: its write of the operations fails
		maxAttempts int
		// want is the operation at the end: its phase and error, and, when running, its
		// stored count of errors in a row.
		wantPhase    operations.OperationPhase
		wantErr      string
		wantAttempts int
	}{
		{
			name:        "errors apart, the answers between them not recorded",
			answers:     []bool{false, true, false, true, false, true, false, true},
			lost:        []bool{false, true, false, true, false, true, false, false},
			maxAttempts: 2,
			wantPhase:   operations.OperationCompleted,
		},
		{
			name:        "errors in a row, the first not recorded",
			answers:     []bool{false, false, false},
			lost:        []bool{true, false, false},
			maxAttempts: 3,
			wantPhase:   operations.OperationFailed,
			wantErr:     "busy (after 3 attempts over 20s)",
		},
		{
			name:        "the error that ends the row not recorded",
			answers:     []bool{false, false, false, false},
			lost:        []bool{false, false, true, false},
			maxAttempts: 3,
			wantPhase:   operations.OperationFailed,
			wantErr:     "busy (after 4 attempts over 30s)",
		},
		{
			name:         "an error recorded, an answer lost, an error",
			answers:      []bool{false, true, false},
			lost:         []bool{false, true, false},
			maxAttempts:  3,
			wantPhase:    operations.OperationNew,
			wantAttempts: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			pass := 0
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				switch {
				case !tc.answers[pass]:
					return operations.Progress{}, busy
				case pass == len(tc.answers)-1:
					return done, nil
				}
				return operations.Progress{NCompleted: int64(pass), NTotal: 100}, nil
			}}
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			store := lossyWrites(e, func(n int) bool { return tc.lost[n-1] })
			policy := monitor.RetryPolicy{MaxAttempts: tc.maxAttempts}
			m := monitor.New(store, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithRetryPolicy(policy))
			for pass = range tc.answers {
				e.clock.AdvanceTo(t0.Add(time.Duration(pass) * 10 * time.Second))
				_, err := m.RunOnce(ctx)
				if !tc.lost[pass] || err != nil { // a pass that writes nothing loses nothing
					require.Equal(t, tc.lost[pass], errors.Is(err, errWriteLost), "pass %d: %v", pass, err)
				}
			}
			got := e.op(o, "a")
			require.Equal(t, tc.wantPhase, got.Status.Phase)
			require.Equal(t, tc.wantErr, got.Status.Error)
			require.Equal(t, tc.wantAttempts, got.Monitor.Attempts)
		})
	}
}
