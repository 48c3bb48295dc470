package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func concurrencyChecks() []check {
	return []check{
		{"UpdateRunLosesNoWrite", testUpdateRunLosesNoWrite},
		{"UpdateRunOneWinner", testUpdateRunOneWinner},
		{"CreateRunOneWinner", testCreateRunOneWinner},
		{"PutOperationsManyRuns", testPutOperationsManyRuns},
		{"PutOperationsOneRun", testPutOperationsOneRun},
		{"ReadersSeeWholeBatches", testReadersSeeWholeBatches},
		{"GetRunFollowsWrites", testGetRunFollowsWrites},
		{"GetOperationFollowsWrites", testGetOperationFollowsWrites},
		{"DeleteDuringWrites", testDeleteDuringWrites},
	}
}

// workers is how many goroutines write at once in a concurrency check.
const workers = 8

// writeRounds is how many writes each writer of a concurrency check makes: 50, or 10
// with -short.
func writeRounds() int {
	if testing.Short() {
		return 10
	}
	return 50
}

// parallel runs f(0) … f(n-1) in goroutines that start together, and collects their
// errors (which must be reported from the test goroutine).
func parallel(n int, f func(i int) error) []error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

func testUpdateRunLosesNoWrite(t tb, s operations.Store) {
	rounds := writeRounds()
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.InProgress, phase.Profile{}))
	errs := parallel(workers, func(int) error {
		for range rounds {
			if _, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
				r.Errors++
				r.ItemsDone += 2
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	noError(t, errors.Join(errs...), "concurrent UpdateRun")
	got, err := s.GetRun(bg, o)
	noError(t, err, "GetRun(%s)", o)
	if got.Errors != workers*rounds || got.ItemsDone != 2*workers*rounds {
		t.Errorf("after %d×%d concurrent increments: Errors = %d, ItemsDone = %d; want %d, %d (a write was lost)",
			workers, rounds, got.Errors, got.ItemsDone, workers*rounds, 2*workers*rounds)
	}
}

// testUpdateRunOneWinner races updates that each end the run in one of three terminal
// phases. Only one phase change may win: every writer that asked for another terminal
// phase must be refused, and the history must hold the winner's change alone. (A writer
// that asked for the phase the winner reached changes nothing, so it may succeed.)
func testUpdateRunOneWinner(t tb, s operations.Store) {
	o := restore("r")
	start := runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{})
	mustCreate(t, s, start)
	ends := []phase.Phase{phase.Completed, phase.PartiallyFailed, phase.Failed}
	errs := parallel(workers, func(i int) error {
		_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
			return r.SetPhase(ends[i%len(ends)], fmt.Sprintf("writer %d", i), at(10+i))
		})
		return err
	})
	got, err := s.GetRun(bg, o)
	noError(t, err, "GetRun(%s)", o)
	if !phase.IsTerminal(got.Phase) {
		t.Fatalf("GetRun(%s) after the race returned a run in %s, want a terminal phase", o, got.Phase)
	}
	for i, err := range errs {
		switch {
		case ends[i%len(ends)] == got.Phase && err != nil:
			t.Errorf("writer %d asked for %s, the phase the run reached: UpdateRun = %v, want nil", i, got.Phase, err)
		case ends[i%len(ends)] != got.Phase && !errors.Is(err, phase.ErrInvalidTransition):
			t.Errorf("writer %d asked for %s after the run reached %s: UpdateRun = %v, want an error wrapping phase.ErrInvalidTransition", i, ends[i%len(ends)], got.Phase, err)
		}
	}
	var winner int
	if n := len(got.History); n > 0 {
		if _, err := fmt.Sscanf(got.History[n-1].Reason, "writer %d", &winner); err != nil {
			t.Fatalf("the last history entry %+v is not a writer's", got.History[n-1])
		}
	}
	want := start.Clone()
	noError(t, want.SetPhase(ends[winner%len(ends)], fmt.Sprintf("writer %d", winner), at(10+winner)), "fixture: SetPhase(%s)", ends[winner%len(ends)])
	if d := diff(want, got); d != "" {
		t.Errorf("GetRun(%s) after the race, want writer %d's change alone (-want +got):\n%s", o, winner, d)
	}
}

func testCreateRunOneWinner(t tb, s operations.Store) {
	errs := parallel(workers, func(i int) error {
		r := newRun(backup("b"))
		r.Owner.UID = fmt.Sprint("uid-", i)
		return s.CreateRun(bg, r)
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both created Backup/b", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, operations.ErrUIDMismatch):
			// Each writer has its own UID, so a loser learns that another object's
			// run holds the name.
			t.Errorf("writer %d: CreateRun = %v, want nil or ErrUIDMismatch", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("every concurrent CreateRun(Backup/b) returned an error, want one to succeed")
	}
	want := newRun(backup("b"))
	want.Owner.UID = fmt.Sprint("uid-", winner)
	wantRuns(t, s, operations.RunFilter{}, []operations.Run{want})
}

func testPutOperationsManyRuns(t tb, s operations.Store) {
	rounds := writeRounds()
	const batch = 20
	owners := make([]operations.Owner, workers)
	for i := range owners {
		owners[i] = backup(fmt.Sprintf("b%d", i))
		mustCreate(t, s, runIn(t, owners[i], phase.WaitingForPluginOperations, phase.Profile{}))
	}
	all := make([][]operations.Operation, workers)
	for i, o := range owners {
		all[i] = newOps(o, "op-", rounds*batch, operations.OperationInProgress)
	}
	errs := parallel(workers, func(i int) error {
		for r := range rounds {
			if err := s.PutOperations(bg, owners[i], cloneOps(all[i][r*batch:(r+1)*batch])); err != nil {
				return err
			}
		}
		return nil
	})
	noError(t, errors.Join(errs...), "concurrent PutOperations")
	for i, o := range owners {
		wantOps(t, s, o, operations.OperationFilter{}, all[i])
	}
}

// testPutOperationsOneRun has every writer put its own batches of new IDs to one run:
// all must be stored, each writer's in its order, each batch contiguous.
func testPutOperationsOneRun(t tb, s operations.Store) {
	rounds := writeRounds()
	const batch = 10
	o := restore("r")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	errs := parallel(workers, func(w int) error {
		for r := range rounds {
			ops := newOps(o, fmt.Sprintf("w%d-r%02d-", w, r), batch, operations.OperationNew)
			if err := s.PutOperations(bg, o, ops); err != nil {
				return err
			}
		}
		return nil
	})
	noError(t, errors.Join(errs...), "concurrent PutOperations")

	got, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s)", o)
	wantEqual(t, workers*rounds*batch, len(got), "number of operations ListOperations(%s) returned", o)
	next := make([]int, workers) // the next round expected of each writer
	for i := 0; i < len(got); i += batch {
		var w, r int
		if _, err := fmt.Sscanf(got[i].ID, "w%d-r%02d-", &w, &r); err != nil || w < 0 || w >= workers {
			t.Fatalf("operation %d has ID %q, not one the writers put", i, got[i].ID)
		}
		if r != next[w] {
			t.Fatalf("operation %d: writer %d's round %d listed where round %d belongs (IDs must be listed in the order first put)", i, w, r, next[w])
		}
		next[w]++
		want := newOps(o, fmt.Sprintf("w%d-r%02d-", w, r), batch, operations.OperationNew)
		if d := diff(ids(want), ids(got[i:i+batch])); d != "" {
			t.Fatalf("the batch starting at operation %d is not contiguous (-want +got):\n%s", i, d)
		}
	}
}

// testReadersSeeWholeBatches has readers list a run while a writer puts batches that add
// operations and then finish them: no reader may see part of a batch.
func testReadersSeeWholeBatches(t tb, s operations.Store) {
	rounds := writeRounds()
	const batch = 10
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))

	const readers = 2
	var (
		done    atomic.Bool  // the writer has finished
		reads   atomic.Int64 // reads completed
		reading atomic.Int32 // readers still reading
	)
	reading.Store(readers)
	errs := parallel(1+readers, func(i int) error {
		if i == 0 { // the writer
			defer done.Store(true)
			for r := range rounds {
				// Wait for a read to end, so that readers are busy while the batches
				// are written. Readers never wait for the writer.
				for n := reads.Load(); reads.Load() == n && reading.Load() > 0; {
					runtime.Gosched()
				}
				ops := newOps(o, fmt.Sprintf("r%02d-", r), batch, operations.OperationNew)
				if err := s.PutOperations(bg, o, cloneOps(ops)); err != nil {
					return err
				}
				for j := range ops {
					ops[j].Status.Phase = operations.OperationCompleted
				}
				if err := s.PutOperations(bg, o, ops); err != nil {
					return err
				}
			}
			return nil
		}
		defer reading.Add(-1)
		for n := 0; !done.Load() || n == 0; n++ {
			all, err := s.ListOperations(bg, o, operations.OperationFilter{})
			if err != nil {
				return err
			}
			if len(all)%batch != 0 {
				return fmt.Errorf("a reader saw %d operations, not a whole number of batches of %d", len(all), batch)
			}
			var unfinished int
			for _, op := range all {
				if !op.Status.Phase.Finished() {
					unfinished++
				}
			}
			if unfinished != 0 && unfinished != batch {
				return fmt.Errorf("a reader saw %d of a batch of %d unfinished", unfinished, batch)
			}
			pending, err := s.ListOperations(bg, o, phases(operations.OperationNew, operations.OperationInProgress))
			if err != nil {
				return err
			}
			if len(pending) != 0 && len(pending) != batch {
				return fmt.Errorf("a reader listed %d unfinished operations, want 0 or %d", len(pending), batch)
			}
			reads.Add(1)
		}
		return nil
	})
	noError(t, errors.Join(errs...), "PutOperations beside ListOperations")
	got, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s)", o)
	wantEqual(t, rounds*batch, len(got), "number of operations ListOperations(%s) returned", o)
}

// testDeleteDuringWrites deletes a run while others update it and put operations to it:
// each write either happens before the deletion or fails with ErrNotFound, and nothing
// of the run survives it.
func testDeleteDuringWrites(t tb, s operations.Store) {
	rounds := writeRounds()
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.InProgress, phase.Profile{}))
	errs := parallel(workers, func(i int) error {
		if i == 0 {
			return s.DeleteRun(bg, o)
		}
		for round := range rounds {
			var err error
			if i%2 == 0 {
				_, err = s.UpdateRun(bg, o, func(r *operations.Run) error { r.Errors++; return nil })
			} else {
				err = s.PutOperations(bg, o, newOps(o, fmt.Sprintf("w%d-r%02d-", i, round), 2, operations.OperationNew))
			}
			if errors.Is(err, operations.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	noError(t, errors.Join(errs...), "a write racing DeleteRun (each must succeed or fail with operations.ErrNotFound)")
	_, err := s.GetRun(bg, o)
	wantError(t, err, operations.ErrNotFound, "GetRun after DeleteRun")
	_, err = s.ListOperations(bg, o, operations.OperationFilter{})
	wantError(t, err, operations.ErrNotFound, "ListOperations after DeleteRun")
}

// followWrites has one writer make rounds writes, each of which sets a counter of the
// record to the round's number (write(n)), while readers read the counter (read): no
// read may return less than the last write acknowledged before it began, or less than
// the reader's previous read, and every reader's last read, after the writer's last
// write, returns rounds. The record was read once before, so that a store (or a
// decorator) that caches reads has something stale to return. what names the read in
// the failure messages.
func followWrites(t tb, what string, write func(n int) error, read func() (int, error)) {
	t.Helper()
	rounds := writeRounds()
	if _, err := read(); err != nil {
		t.Fatalf("%s returned the error %q, want none", what, err)
	}
	const readers = 2
	var (
		acked   atomic.Int64 // the last round whose write returned
		done    atomic.Bool  // the writer has finished
		reads   atomic.Int64 // reads completed
		reading atomic.Int32 // readers still reading
	)
	reading.Store(readers)
	errs := parallel(1+readers, func(i int) error {
		if i == 0 { // the writer
			defer done.Store(true)
			for n := 1; n <= rounds; n++ {
				// Let a read end between writes, so that reads and writes interleave.
				for r := reads.Load(); reads.Load() == r && reading.Load() > 0; {
					runtime.Gosched()
				}
				if err := write(n); err != nil {
					return err
				}
				acked.Store(int64(n))
			}
			return nil
		}
		defer reading.Add(-1)
		last := 0
		for {
			finished := done.Load()
			floor := int(acked.Load())
			got, err := read()
			switch {
			case err != nil:
				return fmt.Errorf("%s returned the error %q, want none", what, err)
			case got < floor:
				return fmt.Errorf("%s returned the value of write %d after write %d had returned: a stale read", what, got, floor)
			case got < last:
				return fmt.Errorf("%s returned the value of write %d after it had returned that of write %d: a read went back", what, got, last)
			case finished && got != rounds:
				return fmt.Errorf("%s returned the value of write %d after the last write (%d) had returned: a stale read", what, got, rounds)
			}
			last = got
			reads.Add(1)
			if finished {
				return nil
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// testGetRunFollowsWrites checks that GetRun, while UpdateRun writes the run, returns
// the last acknowledged write or a later one.
func testGetRunFollowsWrites(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.InProgress, phase.Profile{}))
	followWrites(t, fmt.Sprintf("GetRun(%s)", o),
		func(n int) error {
			_, err := s.UpdateRun(bg, o, func(r *operations.Run) error { r.ItemsDone = n; return nil })
			return err
		},
		func() (int, error) {
			r, err := s.GetRun(bg, o)
			return r.ItemsDone, err
		})
}

// testGetOperationFollowsWrites checks that GetOperation, while PutOperations replaces
// the operation, returns the last acknowledged replacement or a later one.
func testGetOperationFollowsWrites(t tb, s operations.Store) {
	rounds := writeRounds()
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	op := newOp(o, "op-1", operations.OperationInProgress)
	op.Status.NCompleted, op.Status.NTotal = 0, int64(rounds)
	mustPut(t, s, o, []operations.Operation{op.Clone()})
	id := op.ID
	followWrites(t, fmt.Sprintf("GetOperation(%s, %q)", o, id),
		func(n int) error {
			op.Status.NCompleted = int64(n)
			return s.PutOperations(bg, o, []operations.Operation{op.Clone()})
		},
		func() (int, error) {
			got, err := s.GetOperation(bg, o, id)
			return int(got.Status.NCompleted), err
		})
}
