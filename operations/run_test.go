package operations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

var (
	t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

func backupOwner(name string) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
}

func restoreOwner(name string) operations.Owner {
	return operations.Owner{Kind: phase.Restore, Name: name, UID: "uid-" + name}
}

func TestRunSetPhase(t *testing.T) {
	tests := []struct {
		name    string
		run     operations.Run // before
		to      phase.Phase
		want    operations.Run // after
		wantErr error          // when set, want is ignored and the run must be unchanged
	}{
		{
			name: "backup New to InProgress is one step and stamps Started",
			run:  operations.Run{Owner: backupOwner("b"), Phase: phase.New},
			to:   phase.InProgress,
			want: operations.Run{
				Owner: backupOwner("b"), Phase: phase.InProgress, Started: t1, Updated: t1,
				History: []operations.Transition{
					{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "restore New to Completed goes through InProgress and stamps both times",
			run:  operations.Run{Owner: restoreOwner("r"), Phase: phase.New},
			to:   phase.Completed,
			want: operations.Run{
				Owner: restoreOwner("r"), Phase: phase.Completed, Started: t1, Completed: t1, Updated: t1,
				History: []operations.Transition{
					{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t1, Reason: "why"},
					{From: phase.InProgress, To: phase.Completed, Event: phase.EventComplete, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "backup InProgress to Completed goes through Finalizing",
			run: operations.Run{
				Owner: backupOwner("b"), Phase: phase.InProgress, Started: t0, Updated: t0,
				History: []operations.Transition{{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t0}},
			},
			to: phase.Completed,
			want: operations.Run{
				Owner: backupOwner("b"), Phase: phase.Completed, Started: t0, Completed: t1, Updated: t1,
				History: []operations.Transition{
					{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t0},
					{From: phase.InProgress, To: phase.Finalizing, Event: phase.EventFinalize, Time: t1, Reason: "why"},
					{From: phase.Finalizing, To: phase.Completed, Event: phase.EventComplete, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "queued backup New to InProgress takes three steps",
			run:  operations.Run{Owner: backupOwner("b"), Phase: phase.New, Profile: phase.Profile{Queue: true}},
			to:   phase.InProgress,
			want: operations.Run{
				Owner: backupOwner("b"), Phase: phase.InProgress, Profile: phase.Profile{Queue: true}, Started: t1, Updated: t1,
				History: []operations.Transition{
					{From: phase.New, To: phase.Queued, Event: phase.EventQueue, Time: t1, Reason: "why"},
					{From: phase.Queued, To: phase.ReadyToStart, Event: phase.EventReady, Time: t1, Reason: "why"},
					{From: phase.ReadyToStart, To: phase.InProgress, Event: phase.EventStart, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "Started and Completed already set are kept",
			run:  operations.Run{Owner: restoreOwner("r"), Phase: phase.New, Started: t0, Completed: t0},
			to:   phase.Failed,
			want: operations.Run{
				Owner: restoreOwner("r"), Phase: phase.Failed, Started: t0, Completed: t0, Updated: t1,
				History: []operations.Transition{
					{From: phase.New, To: phase.Failed, Event: phase.EventFail, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "a completed backup can be deleted; Completed keeps its time",
			run:  operations.Run{Owner: backupOwner("b"), Phase: phase.Completed, Completed: t0, Updated: t0},
			to:   phase.Deleting,
			want: operations.Run{
				Owner: backupOwner("b"), Phase: phase.Deleting, Completed: t0, Updated: t1,
				History: []operations.Transition{
					{From: phase.Completed, To: phase.Deleting, Event: phase.EventDelete, Time: t1, Reason: "why"},
				},
			},
		},
		{
			name: "the current phase changes nothing, not even Updated",
			run:  operations.Run{Owner: backupOwner("b"), Phase: phase.InProgress, Updated: t0},
			to:   phase.InProgress,
			want: operations.Run{Owner: backupOwner("b"), Phase: phase.InProgress, Updated: t0},
		},
		{
			name:    "a terminal run cannot move back",
			run:     operations.Run{Owner: restoreOwner("r"), Phase: phase.Completed, Completed: t0},
			to:      phase.InProgress,
			wantErr: phase.ErrInvalidTransition,
		},
		{
			name:    "a waiting run cannot move back to InProgress",
			run:     operations.Run{Owner: backupOwner("b"), Phase: phase.WaitingForPluginOperations},
			to:      phase.InProgress,
			wantErr: phase.ErrInvalidTransition,
		},
		{
			name:    "restores have no Deleting phase",
			run:     operations.Run{Owner: restoreOwner("r"), Phase: phase.Completed},
			to:      phase.Deleting,
			wantErr: phase.ErrUnknownPhase,
		},
		{
			name:    "an unknown target phase",
			run:     operations.Run{Owner: backupOwner("b"), Phase: phase.New},
			to:      "Bogus",
			wantErr: phase.ErrUnknownPhase,
		},
		{
			name:    "Queued without the queue profile",
			run:     operations.Run{Owner: backupOwner("b"), Phase: phase.New},
			to:      phase.Queued,
			wantErr: phase.ErrUnknownPhase,
		},
		{
			name:    "an unknown kind",
			run:     operations.Run{Owner: operations.Owner{Kind: "Schedule", Name: "s"}, Phase: phase.New},
			to:      phase.InProgress,
			wantErr: phase.ErrUnknownKind,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run.Clone()
			err := r.SetPhase(tc.to, "why", t1)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				if diff := cmp.Diff(tc.run, r); diff != "" {
					t.Errorf("SetPhase(%s) failed but changed the run (-before +after):\n%s", tc.to, diff)
				}
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("SetPhase(%s) (-want +got):\n%s", tc.to, diff)
			}
			// Whatever SetPhase produces, a store accepts as an update.
			require.NoError(t, operations.ValidateRunUpdate(tc.run, r))
		})
	}
}

func TestRunSetPhaseTransitionError(t *testing.T) {
	r := operations.Run{Owner: backupOwner("b"), Phase: phase.Failed}
	err := r.SetPhase(phase.InProgress, "", t1)
	var te *phase.TransitionError
	require.ErrorAs(t, err, &te)
	want := phase.TransitionError{Kind: phase.Backup, From: phase.Failed, To: phase.InProgress, Err: phase.ErrInvalidTransition}
	if diff := cmp.Diff(want, *te, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("SetPhase error (-want +got):\n%s", diff)
	}
}

func TestRunValidate(t *testing.T) {
	tests := []struct {
		name    string
		run     operations.Run
		wantErr error // nil: valid
	}{
		{"new backup", operations.Run{Owner: backupOwner("b"), Phase: phase.New}, nil},
		{"restore, every field set", operations.Run{
			Owner: restoreOwner("r"), Phase: phase.Finalizing, Profile: phase.Profile{RestoreFinalizing: true},
			OperationTimeout: time.Hour, ItemsTotal: 3, ItemsDone: 2, Errors: 1, Warnings: 1,
			Created: t0, Started: t0, Updated: t0,
		}, nil},
		{"queued backup with the queue profile", operations.Run{Owner: backupOwner("b"), Phase: phase.Queued, Profile: phase.Profile{Queue: true}}, nil},
		{"deleting backup", operations.Run{Owner: backupOwner("b"), Phase: phase.Deleting}, nil},
		{"empty name", operations.Run{Owner: operations.Owner{Kind: phase.Backup}, Phase: phase.New}, operations.ErrInvalid},
		{"empty kind", operations.Run{Owner: operations.Owner{Name: "x"}, Phase: phase.New}, operations.ErrInvalid},
		{"unknown kind", operations.Run{Owner: operations.Owner{Kind: "Schedule", Name: "x"}, Phase: phase.New}, operations.ErrInvalid},
		{"kind of one's own without its profile", operations.Run{Owner: operations.Owner{Kind: "Schedule", Name: "x"}, Phase: phase.New, Profile: phase.Profile{Queue: true}}, phase.ErrUnknownKind},
		{"kind of one's own", operations.Run{Owner: operations.Owner{Kind: "Schedule", Name: "x"}, Phase: phase.Deleting, Profile: phase.Profile{Base: phase.Backup}}, nil},
		{"kind of one's own in a phase its base lacks", operations.Run{Owner: operations.Owner{Kind: "Schedule", Name: "x"}, Phase: phase.Deleting, Profile: phase.Profile{Base: phase.Restore}}, phase.ErrUnknownPhase},
		{"kind of one's own with a bad name", operations.Run{Owner: operations.Owner{Kind: "Sched ule", Name: "x"}, Phase: phase.New, Profile: phase.Profile{Base: phase.Backup}}, phase.ErrUnknownKind},
		{"Backup following Restore", operations.Run{Owner: backupOwner("b"), Phase: phase.New, Profile: phase.Profile{Base: phase.Restore}}, operations.ErrInvalid},
		{"empty phase", operations.Run{Owner: backupOwner("b")}, phase.ErrUnknownPhase},
		{"unknown phase", operations.Run{Owner: backupOwner("b"), Phase: "Running"}, phase.ErrUnknownPhase},
		{"queued backup without the queue profile", operations.Run{Owner: backupOwner("b"), Phase: phase.Queued}, phase.ErrUnknownPhase},
		{"queued restore", operations.Run{Owner: restoreOwner("r"), Phase: phase.Queued, Profile: phase.Profile{Queue: true}}, phase.ErrUnknownPhase},
		{"deleting restore", operations.Run{Owner: restoreOwner("r"), Phase: phase.Deleting}, phase.ErrUnknownPhase},
		{"finalizing restore without the profile", operations.Run{Owner: restoreOwner("r"), Phase: phase.Finalizing}, phase.ErrUnknownPhase},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run.Validate()
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestRunClone(t *testing.T) {
	orig := operations.Run{
		Owner: backupOwner("b"), Phase: phase.InProgress,
		History: []operations.Transition{{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t0, Reason: "a"}},
	}
	c := orig.Clone()
	require.Empty(t, cmp.Diff(orig, c), "Clone differs from the original")

	c.History[0].Reason = "changed"
	c.History = append(c.History, operations.Transition{Reason: "appended"})
	if orig.History[0].Reason != "a" || len(orig.History) != 1 {
		t.Errorf("changing the clone's History changed the original: %+v", orig.History)
	}

	// Appending to a clone made from a history with spare capacity must not write into
	// the original's backing array either.
	spare := make([]operations.Transition, 1, 4)
	orig.History = spare
	c = orig.Clone()
	c.History = append(c.History, operations.Transition{Reason: "x"})
	if got := spare[:2][1].Reason; got != "" {
		t.Errorf("append to the clone wrote %q into the original's backing array", got)
	}

	if got := (operations.Run{}).Clone().History; got != nil {
		t.Errorf("Clone of a nil History = %#v, want nil", got)
	}
}

func TestRunFilterMatch(t *testing.T) {
	b := operations.Run{Owner: backupOwner("b"), Phase: phase.InProgress}
	r := operations.Run{Owner: restoreOwner("r"), Phase: phase.Completed}
	tests := []struct {
		name   string
		filter operations.RunFilter
		want   [2]bool // matches b, matches r
	}{
		{"zero filter selects all", operations.RunFilter{}, [2]bool{true, true}},
		{"kind Backup", operations.RunFilter{Kind: phase.Backup}, [2]bool{true, false}},
		{"kind Restore", operations.RunFilter{Kind: phase.Restore}, [2]bool{false, true}},
		{"phase InProgress", operations.RunFilter{Phases: []phase.Phase{phase.InProgress}}, [2]bool{true, false}},
		{"two phases", operations.RunFilter{Phases: []phase.Phase{phase.Completed, phase.InProgress}}, [2]bool{true, true}},
		{"kind and phase agree", operations.RunFilter{Kind: phase.Restore, Phases: []phase.Phase{phase.Completed}}, [2]bool{false, true}},
		{"kind and phase disagree", operations.RunFilter{Kind: phase.Backup, Phases: []phase.Phase{phase.Completed}}, [2]bool{false, false}},
		{"empty non-nil phases selects all", operations.RunFilter{Phases: []phase.Phase{}}, [2]bool{true, true}},
		{"unknown kind selects none", operations.RunFilter{Kind: "Schedule"}, [2]bool{false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := [2]bool{tc.filter.Match(b), tc.filter.Match(r)}
			if got != tc.want {
				t.Errorf("%+v.Match(backup InProgress, restore Completed) = %v, want %v", tc.filter, got, tc.want)
			}
		})
	}
}

func TestRunRequestCancel(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := operations.Run{Owner: operations.Owner{Kind: phase.Restore, Name: "r"}, Phase: phase.WaitingForPluginOperations}
	require.False(t, r.CancelRequested())
	require.NoError(t, r.RequestCancel("cancelled by jane", t0))
	require.True(t, r.CancelRequested())
	want := []operations.Transition{{From: phase.WaitingForPluginOperations, To: phase.WaitingForPluginOperations, Event: operations.EventCancelRequested, Time: t0, Reason: "cancelled by jane"}}
	if d := cmp.Diff(want, r.History); d != "" {
		t.Errorf("History after RequestCancel (-want +got):\n%s", d)
	}
	// A second request keeps the first.
	require.NoError(t, r.RequestCancel("again", t0.Add(time.Hour)))
	require.Equal(t, operations.CancelRequest{Reason: "cancelled by jane", At: t0}, r.Cancel)
	require.Len(t, r.History, 1)

	done := operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, Phase: phase.Completed}
	require.ErrorIs(t, done.RequestCancel("too late", t0), operations.ErrRunEnded)
	require.False(t, done.CancelRequested())
	require.Empty(t, done.History)
}

// TestTextLimits checks the limits on a run's texts: a cancel reason too long is refused
// and changes nothing; a phase change's reason too long is cut, visibly.
func TestTextLimits(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	r := operations.Run{Owner: o, Phase: phase.New}
	require.NoError(t, r.SetPhase(phase.InProgress, strings.Repeat("s", operations.MaxTextBytes+1), t0))
	reason := r.History[0].Reason
	require.LessOrEqual(t, len(reason), operations.MaxTextBytes)
	require.True(t, strings.HasPrefix(reason, "sss") && strings.HasSuffix(reason, "bytes cut]"), "reason cut to %q…%q", reason[:3], reason[len(reason)-12:])
	require.NoError(t, r.Validate())

	before := r.Clone()
	err := r.RequestCancel(strings.Repeat("c", operations.MaxTextBytes+1), t0)
	require.ErrorIs(t, err, operations.ErrInvalid)
	if diff := cmp.Diff(before, r); diff != "" {
		t.Errorf("a refused cancel changed the run (-before +after):\n%s", diff)
	}
	require.NoError(t, r.RequestCancel(strings.Repeat("c", operations.MaxTextBytes), t0))

	r.FailureReason = strings.Repeat("f", operations.MaxTextBytes+1)
	require.ErrorIs(t, r.Validate(), operations.ErrInvalid)
	require.ErrorIs(t, operations.ValidateRunUpdate(before, r), operations.ErrInvalid)
	// A text stored before the limits is not checked again when an update leaves it.
	require.NoError(t, operations.ValidateRunUpdate(r, r))
}
