package phase_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/looplab/fsm"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/phase"
)

// The machines, written out as data. Every one of the thirteen phases appears once per
// machine: "absent" marks a phase that is not part of it, and an empty list a phase that
// accepts no event. Every (phase, event) pair not listed must be refused.
const (
	backupDefault = `
New:                                       start=InProgress fail-validation=FailedValidation fail=Failed
Queued:                                    absent
ReadyToStart:                              absent
FailedValidation:                          delete=Deleting
InProgress:                                wait=WaitingForPluginOperations wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
WaitingForPluginOperations:                wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing fail=Failed
WaitingForPluginOperationsPartiallyFailed: finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
Finalizing:                                complete=Completed complete-partially-failed=PartiallyFailed fail=Failed
FinalizingPartiallyFailed:                 complete-partially-failed=PartiallyFailed fail=Failed
Completed:                                 delete=Deleting
PartiallyFailed:                           delete=Deleting
Failed:                                    delete=Deleting
Deleting:
`
	backupQueue = `
New:                                       queue=Queued fail-validation=FailedValidation fail=Failed
Queued:                                    ready=ReadyToStart fail=Failed
ReadyToStart:                              start=InProgress fail-validation=FailedValidation fail=Failed
FailedValidation:                          delete=Deleting
InProgress:                                wait=WaitingForPluginOperations wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
WaitingForPluginOperations:                wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing fail=Failed
WaitingForPluginOperationsPartiallyFailed: finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
Finalizing:                                complete=Completed complete-partially-failed=PartiallyFailed fail=Failed
FinalizingPartiallyFailed:                 complete-partially-failed=PartiallyFailed fail=Failed
Completed:                                 delete=Deleting
PartiallyFailed:                           delete=Deleting
Failed:                                    delete=Deleting
Deleting:
`
	restoreDefault = `
New:                                       start=InProgress fail-validation=FailedValidation fail=Failed
Queued:                                    absent
ReadyToStart:                              absent
FailedValidation:
InProgress:                                wait=WaitingForPluginOperations wait-partially-failed=WaitingForPluginOperationsPartiallyFailed complete=Completed complete-partially-failed=PartiallyFailed fail=Failed
WaitingForPluginOperations:                wait-partially-failed=WaitingForPluginOperationsPartiallyFailed complete=Completed fail=Failed
WaitingForPluginOperationsPartiallyFailed: complete-partially-failed=PartiallyFailed fail=Failed
Finalizing:                                absent
FinalizingPartiallyFailed:                 absent
Completed:
PartiallyFailed:
Failed:
Deleting:                                  absent
`
	restoreFinalizing = `
New:                                       start=InProgress fail-validation=FailedValidation fail=Failed
Queued:                                    absent
ReadyToStart:                              absent
FailedValidation:
InProgress:                                wait=WaitingForPluginOperations wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
WaitingForPluginOperations:                wait-partially-failed=WaitingForPluginOperationsPartiallyFailed finalize=Finalizing fail=Failed
WaitingForPluginOperationsPartiallyFailed: finalize-partially-failed=FinalizingPartiallyFailed fail=Failed
Finalizing:                                complete=Completed complete-partially-failed=PartiallyFailed fail=Failed
FinalizingPartiallyFailed:                 complete-partially-failed=PartiallyFailed fail=Failed
Completed:
PartiallyFailed:
Failed:
Deleting:                                  absent
`
)

// profileCase is one kind with one combination of options.
type profileCase struct {
	name string
	kind phase.Kind
	opts []phase.Option
	spec string
}

// profileCases covers every kind with every combination of options; options that do not
// concern a kind must leave its machine as it is.
var profileCases = []profileCase{
	{"backup", phase.Backup, nil, backupDefault},
	{"backup/queue", phase.Backup, []phase.Option{phase.WithQueue()}, backupQueue},
	{"backup/restore-finalizing", phase.Backup, []phase.Option{phase.WithRestoreFinalizing()}, backupDefault},
	{"backup/queue,restore-finalizing", phase.Backup, []phase.Option{phase.WithQueue(), phase.WithRestoreFinalizing()}, backupQueue},
	{"restore", phase.Restore, nil, restoreDefault},
	{"restore/queue", phase.Restore, []phase.Option{phase.WithQueue()}, restoreDefault},
	{"restore/restore-finalizing", phase.Restore, []phase.Option{phase.WithRestoreFinalizing()}, restoreFinalizing},
	{"restore/queue,restore-finalizing", phase.Restore, []phase.Option{phase.WithQueue(), phase.WithRestoreFinalizing()}, restoreFinalizing},
}

// spec is a parsed machine: for each phase of it, the events it accepts and where they lead.
type spec map[phase.Phase]map[phase.Event]phase.Phase

func parseSpec(t testing.TB, text string) spec {
	t.Helper()
	s := spec{}
	seen := map[phase.Phase]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		require.True(t, ok, "line %q", line)
		p := phase.Phase(name)
		require.False(t, seen[p], "phase %s listed twice", p)
		seen[p] = true
		fields := strings.Fields(rest)
		if len(fields) == 1 && fields[0] == "absent" {
			continue
		}
		s[p] = map[phase.Event]phase.Phase{}
		for _, f := range fields {
			e, to, ok := strings.Cut(f, "=")
			require.True(t, ok, "field %q", f)
			s[p][phase.Event(e)] = phase.Phase(to)
		}
	}
	require.Len(t, seen, 13, "every phase must be listed")
	return s
}

// TestTransitionsExhaustive checks every kind × profile × phase × event against the data
// above, plus an event that does not exist.
func TestTransitionsExhaustive(t *testing.T) {
	events := append(phase.Events(), "no-such-event")
	for _, pc := range profileCases {
		want := parseSpec(t, pc.spec)
		for _, p := range phase.Phases() {
			for _, e := range events {
				t.Run(fmt.Sprintf("%s/%s/%s", pc.name, p, e), func(t *testing.T) {
					m, err := phase.NewMachine(pc.kind, p, pc.opts...)
					accepts, member := want[p]
					if !member {
						require.ErrorIs(t, err, phase.ErrUnknownPhase)
						require.Nil(t, m)
						return
					}
					require.NoError(t, err)
					to, ok := accepts[e]
					require.Equal(t, ok, m.Can(e), "Can(%s)", e)
					err = m.Fire(context.Background(), e)
					if ok {
						require.NoError(t, err, "Fire(%s)", e)
						require.Equal(t, to, m.Phase())
						return
					}
					require.ErrorIs(t, err, phase.ErrInvalidTransition)
					var te *phase.TransitionError
					require.ErrorAs(t, err, &te)
					require.Equal(t, &phase.TransitionError{Kind: pc.kind, From: p, Event: e, Err: phase.ErrInvalidTransition}, te)
					require.Equal(t, p, m.Phase(), "a refused event must not move the machine")
				})
			}
		}
	}
}

func TestMachineEvents(t *testing.T) {
	for _, pc := range profileCases {
		want := parseSpec(t, pc.spec)
		for p, accepts := range want {
			m, err := phase.NewMachine(pc.kind, p, pc.opts...)
			require.NoError(t, err)
			var wantEvents []phase.Event
			for _, e := range phase.Events() {
				if _, ok := accepts[e]; ok {
					wantEvents = append(wantEvents, e)
				}
			}
			if diff := cmp.Diff(wantEvents, m.Events()); diff != "" {
				t.Errorf("%s: Events() in %s (-want +got):\n%s", pc.name, p, diff)
			}
			require.Equal(t, pc.kind, m.Kind())
		}
	}
}

func TestNewMachineErrors(t *testing.T) {
	tests := []struct {
		name  string
		kind  phase.Kind
		start phase.Phase
		opts  []phase.Option
		want  error
	}{
		{"unknown kind", "Schedule", phase.New, nil, phase.ErrUnknownKind},
		{"empty kind", "", phase.New, nil, phase.ErrUnknownKind},
		{"unknown phase", phase.Backup, "Uploading", nil, phase.ErrUnknownPhase},
		{"empty phase", phase.Backup, "", nil, phase.ErrUnknownPhase},
		{"phase spelled in lowercase", phase.Backup, "inprogress", nil, phase.ErrUnknownPhase},
		{"queued backup without the queue profile", phase.Backup, phase.Queued, nil, phase.ErrUnknownPhase},
		{"deleting restore", phase.Restore, phase.Deleting, nil, phase.ErrUnknownPhase},
		{"queued restore even with the queue option", phase.Restore, phase.Queued, []phase.Option{phase.WithQueue()}, phase.ErrUnknownPhase},
		{"finalizing restore without the option", phase.Restore, phase.Finalizing, nil, phase.ErrUnknownPhase},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := phase.NewMachine(tc.kind, tc.start, tc.opts...)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, m)
		})
	}
}

func TestMachineProfile(t *testing.T) {
	tests := []struct {
		kind phase.Kind
		opts []phase.Option
		want phase.Profile
	}{
		{phase.Backup, nil, phase.Profile{}},
		{phase.Backup, []phase.Option{phase.WithQueue(), phase.WithRestoreFinalizing()}, phase.Profile{Queue: true}},
		{phase.Restore, []phase.Option{phase.WithQueue(), phase.WithRestoreFinalizing()}, phase.Profile{RestoreFinalizing: true}},
		{phase.Restore, []phase.Option{phase.Profile{Queue: true, RestoreFinalizing: true}}, phase.Profile{RestoreFinalizing: true}},
		{phase.Backup, []phase.Option{nil, phase.Profile{Queue: true}}, phase.Profile{Queue: true}},
	}
	for _, tc := range tests {
		m, err := phase.NewMachine(tc.kind, phase.New, tc.opts...)
		require.NoError(t, err)
		require.Equal(t, tc.want, m.Profile(), "%s %v", tc.kind, tc.opts)
		require.Equal(t, tc.want, phase.ProfileOf(tc.kind, tc.opts...))
	}
}

// TestFireCancelledContext proves that a done context neither moves nor wedges the
// machine. looplab/fsm v1.0.3, handed such a context, leaves its transition pending and
// refuses every later event (its issue #115); the first subtest shows that, so that the
// guard in Fire is known to matter.
func TestFireCancelledContext(t *testing.T) {
	t.Run("bare fsm wedges", func(t *testing.T) {
		f := fsm.NewFSM("New", fsm.Events{{Name: "start", Src: []string{"New"}, Dst: "InProgress"}}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = f.Event(ctx, "start")
		err := f.Event(context.Background(), "start")
		require.ErrorAs(t, err, new(fsm.InTransitionError), "looplab/fsm no longer wedges; the guard may be simplified")
	})
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled},
		{"deadline exceeded", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := phase.NewMachine(phase.Backup, phase.New)
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				err = m.Fire(tc.ctx(), phase.EventStart)
				require.ErrorIs(t, err, tc.want)
				require.False(t, errors.Is(err, phase.ErrInvalidTransition))
				require.Equal(t, phase.New, m.Phase())
			}
			require.NoError(t, m.Fire(context.Background(), phase.EventStart))
			require.Equal(t, phase.InProgress, m.Phase())
			require.NoError(t, m.Fire(context.Background(), phase.EventWait))
			require.Equal(t, phase.WaitingForPluginOperations, m.Phase())
		})
	}
}

// TestFireConcurrent races two outcomes from InProgress on one machine: exactly one wins
// each round, and the loser sees ErrInvalidTransition from the winner's phase.
func TestFireConcurrent(t *testing.T) {
	for round := 0; round < 200; round++ {
		m, err := phase.NewMachine(phase.Restore, phase.InProgress)
		require.NoError(t, err)
		events := []phase.Event{phase.EventComplete, phase.EventFail, phase.EventWait, phase.EventCompletePartiallyFailed}
		errs := make([]error, len(events))
		var wg sync.WaitGroup
		for i, e := range events {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = m.Fire(context.Background(), e)
				_ = m.Phase()
				_ = m.Can(phase.EventFail)
			}()
		}
		wg.Wait()
		var won []phase.Event
		for i, err := range errs {
			if err == nil {
				won = append(won, events[i])
				continue
			}
			require.ErrorIs(t, err, phase.ErrInvalidTransition)
		}
		// WaitingForPluginOperations accepts complete and fail, so wait then one of them
		// may both win; any other pair would mean two outcomes were taken from one phase.
		switch len(won) {
		case 1:
			target, _ := won[0].Target()
			require.Equal(t, target, m.Phase())
		case 2:
			require.Contains(t, won, phase.EventWait)
			last := won[0]
			if last == phase.EventWait {
				last = won[1]
			}
			require.Contains(t, []phase.Event{phase.EventComplete, phase.EventFail}, last, "won %v", won)
			target, _ := last.Target()
			require.Equal(t, target, m.Phase())
		default:
			t.Fatalf("round %d: events %v all won", round, won)
		}
	}
}

// checkWalk fires events chosen by pick on a machine of pc from New and checks the
// invariants every sequence must keep: the phase stays inside the profile, a refused event
// changes nothing, an accepted one leads to its target, no phase is visited twice, and a
// terminal phase accepts nothing but a backup's deletion.
func checkWalk(t *testing.T, pc profileCase, want spec, pick func(n int) int, steps int) {
	t.Helper()
	m, err := phase.NewMachine(pc.kind, phase.New, pc.opts...)
	require.NoError(t, err)
	events := append(phase.Events(), "bogus")
	visited := map[phase.Phase]bool{phase.New: true}
	for i := 0; i < steps; i++ {
		from := m.Phase()
		e := events[pick(len(events))]
		err := m.Fire(context.Background(), e)
		to := m.Phase()
		_, member := want[to]
		require.True(t, member, "%s: reached %s, outside the profile", pc.name, to)
		if err != nil {
			require.ErrorIs(t, err, phase.ErrInvalidTransition)
			require.Equal(t, from, to)
			continue
		}
		target, _ := e.Target()
		require.Equal(t, target, to)
		require.False(t, visited[to], "%s: %s visited twice", pc.name, to)
		visited[to] = true
		if phase.IsTerminal(from) || from == phase.Deleting {
			require.Equal(t, phase.Backup, pc.kind, "%s: a restore left terminal phase %s", pc.name, from)
			require.Equal(t, phase.EventDelete, e, "%s: terminal phase %s accepted %s", pc.name, from, e)
			require.NotEqual(t, phase.Deleting, from, "nothing follows Deleting")
		}
	}
}

// TestRandomWalks is the property test: many random event sequences from New.
func TestRandomWalks(t *testing.T) {
	for _, pc := range profileCases {
		want := parseSpec(t, pc.spec)
		t.Run(pc.name, func(t *testing.T) {
			for seed := int64(1); seed <= 300; seed++ {
				r := rand.New(rand.NewSource(seed))
				checkWalk(t, pc, want, r.Intn, 40)
			}
		})
	}
}

// FuzzMachine lets the fuzzer choose the sequences: each byte picks a profile or an event.
func FuzzMachine(f *testing.F) {
	f.Add([]byte{0, 3, 6, 8, 11})
	f.Add([]byte{1, 0, 1, 3, 5, 7, 9, 11, 12})
	f.Add([]byte{6, 3, 4, 8, 10})
	specs := make([]spec, len(profileCases))
	for i, pc := range profileCases {
		specs[i] = parseSpec(f, pc.spec)
	}
	f.Fuzz(func(t *testing.T, seq []byte) {
		if len(seq) == 0 {
			return
		}
		i := int(seq[0]) % len(profileCases)
		rest := seq[1:]
		pick := func(n int) int {
			if len(rest) == 0 {
				return n - 1
			}
			b := rest[0]
			rest = rest[1:]
			return int(b) % n
		}
		checkWalk(t, profileCases[i], specs[i], pick, len(rest))
	})
}
