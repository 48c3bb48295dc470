package phase_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/phase"
)

// TestAfterMainRun follows the seed design's description of what comes after InProgress,
// one sentence per case.
func TestAfterMainRun(t *testing.T) {
	finalizing := []phase.Option{phase.WithRestoreFinalizing()}
	tests := []struct {
		name string
		kind phase.Kind
		o    phase.Outcome
		opts []phase.Option
		want phase.Phase
	}{
		{"backup, fatal", phase.Backup, phase.Outcome{Fatal: true}, nil, phase.Failed},
		{"backup, fatal with errors and pending operations", phase.Backup, phase.Outcome{Fatal: true, Errors: 3, Pending: 2}, nil, phase.Failed},
		{"restore, fatal", phase.Restore, phase.Outcome{Fatal: true, Pending: 1}, nil, phase.Failed},
		{"backup, no errors, pending", phase.Backup, phase.Outcome{Pending: 1}, nil, phase.WaitingForPluginOperations},
		{"restore, no errors, pending", phase.Restore, phase.Outcome{Pending: 4}, nil, phase.WaitingForPluginOperations},
		{"backup, errors, pending", phase.Backup, phase.Outcome{Errors: 1, Pending: 1}, nil, phase.WaitingForPluginOperationsPartiallyFailed},
		{"restore, errors, pending", phase.Restore, phase.Outcome{Errors: 2, Pending: 1}, nil, phase.WaitingForPluginOperationsPartiallyFailed},
		{"restore, no errors, no pending", phase.Restore, phase.Outcome{}, nil, phase.Completed},
		{"restore, errors, no pending", phase.Restore, phase.Outcome{Errors: 1}, nil, phase.PartiallyFailed},
		{"backup, no errors, no pending", phase.Backup, phase.Outcome{}, nil, phase.Finalizing},
		{"backup, errors, no pending", phase.Backup, phase.Outcome{Errors: 5}, nil, phase.FinalizingPartiallyFailed},
		{"finalizing restore, no errors, no pending", phase.Restore, phase.Outcome{}, finalizing, phase.Finalizing},
		{"finalizing restore, errors, no pending", phase.Restore, phase.Outcome{Errors: 1}, finalizing, phase.FinalizingPartiallyFailed},
		{"finalizing restore, errors, pending", phase.Restore, phase.Outcome{Errors: 1, Pending: 1}, finalizing, phase.WaitingForPluginOperationsPartiallyFailed},
		{"queued backup, no errors, no pending", phase.Backup, phase.Outcome{}, []phase.Option{phase.WithQueue()}, phase.Finalizing},
		{"negative counts are zero", phase.Restore, phase.Outcome{Errors: -1, Pending: -1}, nil, phase.Completed},
		{"unknown kind", "Schedule", phase.Outcome{}, nil, ""},
		// A cancel requested during the main run fails the run, once no operation is
		// left for the Monitor to cancel.
		{"backup, cancelled, no pending", phase.Backup, phase.Outcome{Cancelled: true}, nil, phase.Failed},
		{"restore, cancelled, no pending", phase.Restore, phase.Outcome{Cancelled: true}, nil, phase.Failed},
		{"finalizing restore, cancelled, errors, no pending", phase.Restore, phase.Outcome{Cancelled: true, Errors: 2}, finalizing, phase.Failed},
		{"queued backup, cancelled, no pending", phase.Backup, phase.Outcome{Cancelled: true}, []phase.Option{phase.WithQueue()}, phase.Failed},
		{"backup, cancelled, negative pending", phase.Backup, phase.Outcome{Cancelled: true, Pending: -3}, nil, phase.Failed},
		{"backup, cancelled, pending: the Monitor cancels them", phase.Backup, phase.Outcome{Cancelled: true, Pending: 2}, nil, phase.WaitingForPluginOperations},
		{"restore, cancelled, errors, pending", phase.Restore, phase.Outcome{Cancelled: true, Errors: 1, Pending: 1}, nil, phase.WaitingForPluginOperationsPartiallyFailed},
		{"backup, cancelled and fatal", phase.Backup, phase.Outcome{Cancelled: true, Fatal: true, Pending: 1}, nil, phase.Failed},
		{"unknown kind, cancelled", "Schedule", phase.Outcome{Cancelled: true}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := phase.AfterMainRun(tc.kind, tc.o, tc.opts...)
			if got != tc.want {
				t.Fatalf("AfterMainRun(%s, %+v) = %q, want %q", tc.kind, tc.o, got, tc.want)
			}
			if got == "" {
				return
			}
			// Whatever the rule says must be reachable from InProgress in one step.
			m, err := phase.NewMachine(tc.kind, phase.InProgress, tc.opts...)
			require.NoError(t, err)
			e, ok := phase.EventTo(got)
			require.True(t, ok)
			require.True(t, m.Can(e), "InProgress cannot take %s", e)
		})
	}
}

func TestAfterPoll(t *testing.T) {
	const (
		wait   = phase.WaitingForPluginOperations
		waitPF = phase.WaitingForPluginOperationsPartiallyFailed
	)
	finalizing := []phase.Option{phase.WithRestoreFinalizing()}
	tests := []struct {
		name      string
		kind      phase.Kind
		current   phase.Phase
		newErrors int
		pending   int
		opts      []phase.Option
		want      phase.Phase
	}{
		{"backup waiting, still running, no new errors: stays", phase.Backup, wait, 0, 3, nil, wait},
		{"backup waiting, still running, a new error", phase.Backup, wait, 1, 3, nil, waitPF},
		{"backup partially failed, still running: stays", phase.Backup, waitPF, 0, 1, nil, waitPF},
		{"backup partially failed, still running, more errors: stays", phase.Backup, waitPF, 2, 1, nil, waitPF},
		{"backup waiting, all ended: finalizing", phase.Backup, wait, 0, 0, nil, phase.Finalizing},
		{"backup waiting, all ended with a new error", phase.Backup, wait, 1, 0, nil, phase.FinalizingPartiallyFailed},
		{"backup partially failed, all ended", phase.Backup, waitPF, 0, 0, nil, phase.FinalizingPartiallyFailed},
		{"restore waiting, all ended: completed", phase.Restore, wait, 0, 0, nil, phase.Completed},
		{"restore waiting, all ended with a new error", phase.Restore, wait, 1, 0, nil, phase.PartiallyFailed},
		{"restore partially failed, all ended", phase.Restore, waitPF, 0, 0, nil, phase.PartiallyFailed},
		{"restore waiting, still running, a new error", phase.Restore, wait, 4, 2, nil, waitPF},
		{"finalizing restore waiting, all ended", phase.Restore, wait, 0, 0, finalizing, phase.Finalizing},
		{"finalizing restore partially failed, all ended", phase.Restore, waitPF, 0, 0, finalizing, phase.FinalizingPartiallyFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := phase.AfterPoll(tc.kind, tc.current, tc.newErrors, tc.pending, tc.opts...)
			require.NoError(t, err)
			if got != tc.want {
				t.Fatalf("AfterPoll(%s, %s, %d, %d) = %s, want %s", tc.kind, tc.current, tc.newErrors, tc.pending, got, tc.want)
			}
			_, err = phase.Path(tc.kind, tc.current, got, tc.opts...)
			require.NoError(t, err, "the result must be reachable")
		})
	}
}

func TestAfterPollErrors(t *testing.T) {
	tests := []struct {
		name    string
		kind    phase.Kind
		current phase.Phase
		want    error
	}{
		{"unknown kind", "Schedule", phase.WaitingForPluginOperations, phase.ErrUnknownKind},
		{"unknown phase", phase.Backup, "Uploading", phase.ErrUnknownPhase},
		{"phase outside the profile", phase.Restore, phase.Finalizing, phase.ErrUnknownPhase},
		{"in progress is not polled", phase.Backup, phase.InProgress, phase.ErrInvalidTransition},
		{"finalizing is not polled", phase.Backup, phase.Finalizing, phase.ErrInvalidTransition},
		{"terminal is not polled", phase.Restore, phase.Completed, phase.ErrInvalidTransition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := phase.AfterPoll(tc.kind, tc.current, 0, 0)
			require.ErrorIs(t, err, tc.want)
			require.Empty(t, got)
		})
	}
}

func TestOnRestart(t *testing.T) {
	const (
		backupReason  = `found a backup with status "InProgress" during the server starting, mark it as "Failed"`
		restoreReason = `found a restore with status "InProgress" during the server starting, mark it as "Failed"`
	)
	tests := []struct {
		kind        phase.Kind
		p           phase.Phase
		wantNext    phase.Phase
		wantReason  string
		wantChanged bool
	}{
		{phase.Backup, phase.InProgress, phase.Failed, backupReason, true},
		{phase.Restore, phase.InProgress, phase.Failed, restoreReason, true},
		{phase.Backup, phase.WaitingForPluginOperations, phase.WaitingForPluginOperations, `found a backup with status "WaitingForPluginOperations" during the server starting, resume it`, false},
		{phase.Restore, phase.WaitingForPluginOperationsPartiallyFailed, phase.WaitingForPluginOperationsPartiallyFailed, `found a restore with status "WaitingForPluginOperationsPartiallyFailed" during the server starting, resume it`, false},
		{phase.Backup, phase.Finalizing, phase.Finalizing, `found a backup with status "Finalizing" during the server starting, resume it`, false},
		{phase.Backup, phase.FinalizingPartiallyFailed, phase.FinalizingPartiallyFailed, `found a backup with status "FinalizingPartiallyFailed" during the server starting, resume it`, false},
		{phase.Backup, phase.New, phase.New, "", false},
		{phase.Backup, phase.Queued, phase.Queued, "", false},
		{phase.Backup, phase.ReadyToStart, phase.ReadyToStart, "", false},
		{phase.Backup, phase.Completed, phase.Completed, "", false},
		{phase.Restore, phase.PartiallyFailed, phase.PartiallyFailed, "", false},
		{phase.Backup, phase.Failed, phase.Failed, "", false},
		{phase.Backup, phase.FailedValidation, phase.FailedValidation, "", false},
		{phase.Backup, phase.Deleting, phase.Deleting, "", false},
		{phase.Backup, "Uploading", "Uploading", "", false},
		{"Schedule", phase.InProgress, phase.InProgress, "", false},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind)+"/"+string(tc.p), func(t *testing.T) {
			next, reason, changed := phase.OnRestart(tc.kind, tc.p)
			got := []any{next, reason, changed}
			want := []any{tc.wantNext, tc.wantReason, tc.wantChanged}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("OnRestart(%s, %s) (-want +got):\n%s", tc.kind, tc.p, diff)
			}
		})
	}
}

func TestPath(t *testing.T) {
	tests := []struct {
		name     string
		kind     phase.Kind
		from, to phase.Phase
		opts     []phase.Option
		want     []phase.Event
		wantErr  error
	}{
		{"same phase", phase.Backup, phase.Completed, phase.Completed, nil, nil, nil},
		{"one step", phase.Backup, phase.New, phase.InProgress, nil, []phase.Event{phase.EventStart}, nil},
		{"through partially failed", phase.Backup, phase.WaitingForPluginOperations, phase.FinalizingPartiallyFailed, nil,
			[]phase.Event{phase.EventWaitPartiallyFailed, phase.EventFinalizePartiallyFailed}, nil},
		{"whole backup", phase.Backup, phase.New, phase.Deleting, nil,
			[]phase.Event{phase.EventFailValidation, phase.EventDelete}, nil},
		{"queued backup to the end", phase.Backup, phase.New, phase.Completed, []phase.Option{phase.WithQueue()},
			[]phase.Event{phase.EventQueue, phase.EventReady, phase.EventStart, phase.EventFinalize, phase.EventComplete}, nil},
		{"restore without finalizing", phase.Restore, phase.New, phase.PartiallyFailed, nil,
			[]phase.Event{phase.EventStart, phase.EventCompletePartiallyFailed}, nil},
		{"terminal never goes back", phase.Backup, phase.Completed, phase.InProgress, nil, nil, phase.ErrInvalidTransition},
		{"failed never completes", phase.Restore, phase.Failed, phase.Completed, nil, nil, phase.ErrInvalidTransition},
		{"partially failed never recovers", phase.Backup, phase.WaitingForPluginOperationsPartiallyFailed, phase.Finalizing, nil, nil, phase.ErrInvalidTransition},
		{"restore cannot be deleted", phase.Restore, phase.Completed, phase.Deleting, nil, nil, phase.ErrUnknownPhase},
		{"unknown phase", phase.Backup, "Uploading", phase.Completed, nil, nil, phase.ErrUnknownPhase},
		{"unknown kind", "Schedule", phase.New, phase.Completed, nil, nil, phase.ErrUnknownKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := phase.Path(tc.kind, tc.from, tc.to, tc.opts...)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Path(%s, %s, %s) (-want +got):\n%s", tc.kind, tc.from, tc.to, diff)
			}
		})
	}
}

// TestPathAgreesWithMachine checks Path against firing: for every pair of phases of every
// profile, a path exists exactly when firing its events from `from` ends in `to`.
func TestPathAgreesWithMachine(t *testing.T) {
	for _, pc := range profileCases {
		want := parseSpec(t, pc.spec)
		for from := range want {
			for to := range want {
				events, err := phase.Path(pc.kind, from, to, pc.opts...)
				if err != nil {
					require.ErrorIs(t, err, phase.ErrInvalidTransition)
					continue
				}
				m, err := phase.NewMachine(pc.kind, from, pc.opts...)
				require.NoError(t, err)
				for _, e := range events {
					require.NoError(t, m.Fire(context.Background(), e))
				}
				require.Equal(t, to, m.Phase(), "%s: Path(%s, %s) = %v", pc.name, from, to, events)
			}
		}
	}
}
