package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// passChecks are the checks of the group Pass: the contract of an
// operations.PassReader. A store built with WithoutPassReader gets one check instead,
// that it is not one.
func passChecks(cfg config) []check {
	if cfg.withoutPassReader {
		return []check{{"NotAPassReader", testNotAPassReader}}
	}
	return []check{
		{"ReadsWhatIsStored", testPassReadsWhatIsStored},
		{"RunMovedWhileReadComesOnce", testPassRunMoved},
		{"CommitWrites", testPassCommitWrites},
		{"CommitOfAStaleRunWritesNothing", testPassStale},
		{"CommitRefusesWhatItWasNotGiven", testPassRefuses},
		{"CommitsInRaceLoseNoUpdate", testPassRace},
		{"DoneContext", testPassContext},
	}
}

// passer returns s as a PassReader, or fails t.
func passer(t tb, s operations.Store) operations.PassReader {
	t.Helper()
	p, ok := s.(operations.PassReader)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.PassReader, so a Monitor's pass reads each run with calls of its own: "+
			"a decorator type that embeds the operations.Store it wraps hides that ability of the store (decorate.Store keeps it); "+
			"a store that is not meant to have it passes storetest.WithoutPassReader", s)
	}
	return p
}

func testNotAPassReader(t tb, s operations.Store) {
	if _, ok := s.(operations.PassReader); ok {
		t.Errorf("the store (%T) is an operations.PassReader, but the suite was told WithoutPassReader: its pass contract goes unchecked", s)
	}
}

// readPass reads every run that f selects with ReadPass, checking that no run comes
// twice and no page is empty, and returns them by owner, without its UID (see
// noUID).
func readPass(t tb, p operations.PassReader, f operations.RunFilter) map[operations.Owner]operations.PassRun {
	t.Helper()
	out := map[operations.Owner]operations.PassRun{}
	err := p.ReadPass(bg, f, func(page []operations.PassRun) error {
		if len(page) == 0 {
			t.Errorf("ReadPass(%+v) gave an empty page", f)
		}
		for _, r := range page {
			o := noUID(r.Run.Owner)
			if _, dup := out[o]; dup {
				t.Errorf("ReadPass(%+v) gave the run %s twice", f, o)
			}
			out[o] = r
		}
		return nil
	})
	noError(t, err, "ReadPass(%+v)", f)
	return out
}

// noUID returns o without its UID, the key of readPass's map.
func noUID(o operations.Owner) operations.Owner {
	o.UID = ""
	return o
}

// passFixture stores, for the Pass checks, n waiting runs (backups and restores, some
// partially failed) of operations in every phase, and runs in other phases; it returns
// the waiting runs' owners.
func passFixture(t tb, s operations.Store, n int) []operations.Owner {
	t.Helper()
	var waiting []operations.Owner
	for i := range n {
		o := backup(fmt.Sprintf("pass-%03d", i))
		ph := phase.WaitingForPluginOperations
		if i%3 == 1 {
			o = restore(fmt.Sprintf("pass-%03d", i))
		}
		if i%5 == 4 {
			ph = phase.WaitingForPluginOperationsPartiallyFailed
		}
		mustCreate(t, s, runIn(t, o, ph, phase.Profile{}))
		ops := slices.Concat(
			newOps(o, "new", i%3, operations.OperationNew),
			newOps(o, "running", 2, operations.OperationInProgress),
			newOps(o, "done", i%2, operations.OperationCompleted),
			newOps(o, "failed", i%4/3, operations.OperationFailed),
		)
		mustPut(t, s, o, ops)
		waiting = append(waiting, o)
	}
	for _, p := range []phase.Phase{phase.InProgress, phase.Finalizing, phase.Completed} {
		o := backup("other-" + string(p))
		mustCreate(t, s, runIn(t, o, p, phase.Profile{}))
		mustPut(t, s, o, newOps(o, "op", 2, operations.OperationInProgress))
	}
	return waiting
}

// waitingRuns is the filter of a Monitor's pass.
var waitingRuns = operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}

// testPassReadsWhatIsStored: ReadPass gives every run the filter selects, once (over
// more than a page of 100 runs), with the run GetRun returns and the unfinished
// operations ListOperations returns, in their order; by kind too.
func testPassReadsWhatIsStored(t tb, s operations.Store) {
	p := passer(t, s)
	waiting := passFixture(t, s, 105)
	for _, f := range []operations.RunFilter{waitingRuns, {Kind: phase.Restore, Phases: waitingRuns.Phases}} {
		got := readPass(t, p, f)
		want := 0
		for _, o := range waiting {
			if f.Kind != "" && o.Kind != f.Kind {
				continue
			}
			want++
			r, ok := got[noUID(o)]
			if !ok {
				t.Errorf("ReadPass(%+v) left out the run %s", f, o)
				continue
			}
			wantRun(t, s, r.Run)
			wantOps(t, s, o, phases(operations.OperationNew, operations.OperationInProgress), r.Operations)
		}
		if len(got) != want {
			t.Errorf("ReadPass(%+v) gave %d runs, want %d", f, len(got), want)
		}
	}
}

// testPassRunMoved: a run that moves, while ReadPass's function runs, from a phase
// the filter selects to another that it selects (as a Monitor's poll moves a run to
// WaitingForPluginOperationsPartiallyFailed) is given once, over more than a page of
// 100 runs: every waiting run is moved while its page is polled.
func testPassRunMoved(t tb, s operations.Store) {
	p := passer(t, s)
	waiting := passFixture(t, s, 105)
	given := map[operations.Owner]int{}
	err := p.ReadPass(bg, waitingRuns, func(page []operations.PassRun) error {
		for _, r := range page {
			o := r.Run.Owner
			given[noUID(o)]++
			if r.Run.Phase != phase.WaitingForPluginOperations {
				continue
			}
			_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
				return r.SetPhase(phase.WaitingForPluginOperationsPartiallyFailed, "an operation failed", at(40))
			})
			noError(t, err, "UpdateRun(%s)", o)
		}
		return nil
	})
	noError(t, err, "ReadPass")
	for _, o := range waiting {
		if n := given[noUID(o)]; n != 1 {
			t.Errorf("ReadPass gave the run %s %d times, moved while it read, want once", o, n)
		}
	}
}

// testPassCommitWrites: CommitPass writes a batch of replacements as PutOperations
// would, whatever it does to each operation (progress, completion, failure); a second
// ReadPass shows it, and a CommitPass of nothing writes nothing and succeeds.
func testPassCommitWrites(t tb, s operations.Store) {
	p := passer(t, s)
	o := passFixture(t, s, 3)[2]
	before, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s)", o)
	r := readPass(t, p, waitingRuns)[noUID(o)]
	if len(r.Operations) < 3 {
		t.Fatalf("the fixture's run %s has %d unfinished operations, want 3 or more", o, len(r.Operations))
	}
	batch := cloneOps(r.Operations[:3])
	batch[0].Status.Phase = operations.OperationInProgress
	batch[0].Status.NCompleted, batch[0].Status.NTotal = 7, 10
	batch[1].Status.Phase = operations.OperationCompleted
	batch[2].Status.Phase = operations.OperationFailed
	batch[2].Status.Error = "failed in a pass"
	noError(t, p.CommitPass(bg, r, batch), "CommitPass(%s, 3 operations)", o)
	noError(t, p.CommitPass(bg, readPass(t, p, waitingRuns)[noUID(o)], nil), "CommitPass(%s, no operation)", o)

	want := cloneOps(before)
	for _, b := range batch {
		i := slices.IndexFunc(want, func(op operations.Operation) bool { return op.ID == b.ID })
		want[i] = b
	}
	wantAllOps(t, s, o, want)
	again := readPass(t, p, waitingRuns)[noUID(o)]
	if d := diffOps(slices.DeleteFunc(cloneOps(want), func(op operations.Operation) bool { return op.Status.Phase.Finished() }), again.Operations); d != "" {
		t.Errorf("ReadPass after CommitPass: the unfinished operations of %s %s", o, d)
	}
}

// testPassStale: a run changed between ReadPass and CommitPass, by a change of its
// record, a write of another of its operations, a new operation, its deletion or its
// deletion and creation again, makes CommitPass fail with ErrStale and write nothing.
func testPassStale(t tb, s operations.Store) {
	p := passer(t, s)
	for _, tc := range []struct {
		name   string
		change func(o operations.Owner, r operations.PassRun)
	}{
		{"RunUpdated", func(o operations.Owner, _ operations.PassRun) {
			_, err := s.UpdateRun(bg, o, func(r *operations.Run) error { r.Warnings++; return nil })
			noError(t, err, "UpdateRun(%s)", o)
		}},
		{"CancelRequested", func(o operations.Owner, _ operations.PassRun) {
			_, err := s.UpdateRun(bg, o, func(r *operations.Run) error { return r.RequestCancel("stop", at(30)) })
			noError(t, err, "UpdateRun(%s)", o)
		}},
		{"AnotherOperationWritten", func(o operations.Owner, r operations.PassRun) {
			other := r.Operations[len(r.Operations)-1]
			other.Status.NCompleted++
			mustPut(t, s, o, []operations.Operation{other})
		}},
		{"OperationAdded", func(o operations.Owner, _ operations.PassRun) {
			mustPut(t, s, o, newOps(o, "added", 1, operations.OperationNew))
		}},
		{"Deleted", func(o operations.Owner, _ operations.PassRun) {
			noError(t, s.DeleteRun(bg, o), "DeleteRun(%s)", o)
		}},
		{"DeletedAndCreated", func(o operations.Owner, r operations.PassRun) {
			noError(t, s.DeleteRun(bg, o), "DeleteRun(%s)", o)
			mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
			mustPut(t, s, o, cloneOps(r.Operations))
		}},
	} {
		t.Run(tc.name, func(t tb) {
			o := backup("stale-" + tc.name)
			mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
			mustPut(t, s, o, newOps(o, "op", 3, operations.OperationInProgress))
			r := readPass(t, p, waitingRuns)[noUID(o)]
			tc.change(o, r)
			var stored []operations.Operation
			if _, err := s.GetRun(bg, o); err == nil {
				stored, err = s.ListOperations(bg, o, operations.OperationFilter{})
				noError(t, err, "ListOperations(%s)", o)
			}
			batch := cloneOps(r.Operations[:1])
			batch[0].Status.Phase = operations.OperationCompleted
			wantError(t, p.CommitPass(bg, r, batch), operations.ErrStale, "CommitPass(%s) after the run changed (%s)", o, tc.name)
			if stored != nil {
				wantAllOps(t, s, o, stored)
			}
		})
	}
}

// testPassRefuses: CommitPass refuses, writing nothing, an operation that is not one of
// the run's unfinished operations as read (a new ID, a finished one), an invalid batch,
// and a PassRun that no ReadPass of the store made.
func testPassRefuses(t tb, s operations.Store) {
	p := passer(t, s)
	o := passFixture(t, s, 2)[1] // one operation finished
	r := readPass(t, p, waitingRuns)[noUID(o)]
	stored, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s)", o)
	finished := stored[slices.IndexFunc(stored, func(op operations.Operation) bool { return op.Status.Phase.Finished() })]
	dup := cloneOps(r.Operations[:1])
	for _, tc := range []struct {
		name  string
		r     operations.PassRun
		batch []operations.Operation
	}{
		{"NewOperation", r, newOps(o, "unknown", 1, operations.OperationInProgress)},
		{"FinishedOperation", r, []operations.Operation{finished}},
		{"SameIDTwice", r, append(dup, dup[0])},
		{"OperationOfAnotherRun", r, newOps(backup("another"), "running", 1, operations.OperationInProgress)},
		{"NoSnapshot", operations.PassRun{Run: r.Run, Operations: r.Operations}, cloneOps(r.Operations[:1])},
		{"SnapshotOfAnotherKind", operations.PassRun{Run: r.Run, Operations: r.Operations, Snapshot: "forged"}, cloneOps(r.Operations[:1])},
	} {
		wantError(t, p.CommitPass(bg, tc.r, tc.batch), operations.ErrInvalid, "CommitPass(%s) of a batch with %s", o, tc.name)
	}
	wantAllOps(t, s, o, stored)
}

// testPassRace: writers that each read the run with ReadPass and add one to an
// operation's NCompleted with CommitPass, while one of them also updates the run now
// and then, lose no update:
// the count at the end is the number of commits that succeeded, and every other ended
// with ErrStale.
func testPassRace(t tb, s operations.Store) {
	p := passer(t, s)
	o := backup("raced")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	mustPut(t, s, o, newOps(o, "op", 2, operations.OperationInProgress))
	const writers, tries = 4, 15
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed int
		problems  []string
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				if w == 0 && i%3 == 0 { // the run's own updates, to make reads stale too
					if _, err := s.UpdateRun(bg, o, func(r *operations.Run) error { r.Warnings++; return nil }); err != nil {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("UpdateRun(%s): %v", o, err))
						mu.Unlock()
					}
				}
				var r operations.PassRun
				err := p.ReadPass(bg, operations.RunFilter{Kind: phase.Backup, Phases: waitingRuns.Phases}, func(page []operations.PassRun) error {
					for _, pr := range page {
						if pr.Run.Owner.Name == o.Name {
							r = pr
						}
					}
					return nil
				})
				if err == nil && len(r.Operations) != 2 {
					err = fmt.Errorf("read %d operations, want 2", len(r.Operations))
				}
				if err == nil {
					batch := cloneOps(r.Operations[:1])
					batch[0].Status.NCompleted++
					err = p.CommitPass(bg, r, batch)
				}
				mu.Lock()
				switch {
				case err == nil:
					committed++
				case !errors.Is(err, operations.ErrStale):
					problems = append(problems, fmt.Sprintf("ReadPass and CommitPass(%s): %v, want nil or ErrStale", o, err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, p := range problems {
		t.Errorf("%s", p)
	}
	first := newOps(o, "op", 1, operations.OperationInProgress)[0]
	got, err := s.GetOperation(bg, o, first.ID)
	noError(t, err, "GetOperation(%s, %q)", o, first.ID)
	if got.Status.NCompleted != first.Status.NCompleted+int64(committed) {
		t.Errorf("after %d commits that succeeded, each adding 1 to NCompleted, GetOperation(%s, %q) has NCompleted %d, want %d: an update was lost or made twice",
			committed, o, first.ID, got.Status.NCompleted, first.Status.NCompleted+int64(committed))
	}
	if committed == 0 {
		t.Errorf("no CommitPass of %d succeeded", writers*tries)
	}
}

// testPassContext: ReadPass and CommitPass with a done context fail with its error, and
// CommitPass writes nothing.
func testPassContext(t tb, s operations.Store) {
	p := passer(t, s)
	o := passFixture(t, s, 1)[0]
	r := readPass(t, p, waitingRuns)[noUID(o)]
	stored, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s)", o)
	done, cancel := context.WithCancel(bg)
	cancel()
	err = p.ReadPass(done, waitingRuns, func([]operations.PassRun) error { return nil })
	wantError(t, err, context.Canceled, "ReadPass with a done context")
	batch := cloneOps(r.Operations[:1])
	batch[0].Status.Phase = operations.OperationCompleted
	wantError(t, p.CommitPass(done, r, batch), context.Canceled, "CommitPass(%s) with a done context", o)
	wantAllOps(t, s, o, stored)
	// fn's error is ReadPass's, as it is.
	stop := errors.New("stop")
	wantError(t, p.ReadPass(bg, waitingRuns, func([]operations.PassRun) error { return stop }), stop, "ReadPass whose function fails")
}
