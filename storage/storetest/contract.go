package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// testUIDMismatch checks that a run answers only to its own object: every call that
// names an owner whose UID is set and differs from the stored run's fails with
// operations.ErrUIDMismatch (an operations.ErrConflict) and changes nothing, while an
// owner without a UID, or with the run's, is served.
func testUIDMismatch(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	op := newOp(o, "op-1", operations.OperationNew)
	mustPut(t, s, o, []operations.Operation{op})

	stale := o
	stale.UID = "uid-of-a-deleted-object"
	staleOp := op.Clone()
	staleOp.Owner = stale
	calls := map[string]error{
		"GetRun":         second(s.GetRun(bg, stale)),
		"UpdateRun":      second(s.UpdateRun(bg, stale, func(r *operations.Run) error { r.Warnings = 99; return nil })),
		"PutOperations":  s.PutOperations(bg, stale, []operations.Operation{staleOp}),
		"GetOperation":   second(s.GetOperation(bg, stale, op.ID)),
		"ListOperations": second(s.ListOperations(bg, stale, operations.OperationFilter{})),
		"DeleteRun":      s.DeleteRun(bg, stale),
		"CreateRun":      s.CreateRun(bg, newRun(stale)),
	}
	for name, err := range calls {
		if !errors.Is(err, operations.ErrUIDMismatch) || !errors.Is(err, operations.ErrConflict) {
			t.Errorf("%s with another UID = %v, want ErrUIDMismatch (and ErrConflict)", name, err)
		}
	}
	wantRun(t, s, newRun(o))
	wantAllOps(t, s, o, []operations.Operation{op})

	anyUID := o
	anyUID.UID = ""
	_, err := s.UpdateRun(bg, anyUID, func(r *operations.Run) error { r.Warnings = 1; return nil })
	noError(t, err, "UpdateRun without a UID")
	noError(t, s.DeleteRun(bg, o), "DeleteRun with the run's UID")
}

// testNilUpdate checks that UpdateRun refuses a nil update function.
func testNilUpdate(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	_, err := s.UpdateRun(bg, o, nil)
	wantError(t, err, operations.ErrInvalid, "UpdateRun(%s, nil)", o)
	wantRun(t, s, newRun(o))
}

// testUpdateHoldsBackNoOtherCall checks the rule of the contract on update functions:
// while one runs (it waits here until the check lets it go), every read, of its run
// too, and the writes of other runs go on from other goroutines, and the update then
// applies. The calls the update function waits for are made by the check's goroutine;
// update itself calls nothing of the Store, as the contract says.
func testUpdateHoldsBackNoOtherCall(t tb, s operations.Store) {
	o, other := backup("b"), restore("r")
	mustCreate(t, s, newRun(o), newRun(other))
	op := newOp(o, "op-1", operations.OperationNew)
	mustPut(t, s, o, []operations.Operation{op})

	inUpdate, release := make(chan struct{}), make(chan struct{})
	type result struct {
		run operations.Run
		err error
	}
	updated := make(chan result, 1)
	go func() {
		first := true
		r, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
			if first {
				first = false
				close(inUpdate)
				<-release
			}
			r.ItemsTotal = 7
			return nil
		})
		updated <- result{r, err}
	}()
	released := false
	letGo := func() {
		if !released {
			released = true
			close(release)
		}
	}
	defer func() { // no goroutine outlives the check, whatever stops it
		letGo()
		<-updated
	}()
	<-inUpdate

	// A store that holds these calls back while update runs would hang here; the
	// context ends the wait with a clear failure instead.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	got, err := s.GetRun(ctx, o)
	noError(t, err, "GetRun(%s) while an update of it runs", o)
	wantEqual(t, newRun(o), got, "GetRun(%s) while an update of it runs", o)
	_, err = s.ListRuns(ctx, operations.RunFilter{})
	noError(t, err, "ListRuns while an update runs")
	_, err = s.GetOperation(ctx, o, op.ID)
	noError(t, err, "GetOperation(%s, %q) while an update of its run runs", o, op.ID)
	_, err = s.ListOperations(ctx, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s) while an update of its run runs", o)
	_, err = s.UpdateRun(ctx, other, func(r *operations.Run) error { r.Warnings = 2; return nil })
	noError(t, err, "UpdateRun(%s) while an update of %s runs", other, o)
	noError(t, s.PutOperations(ctx, other, []operations.Operation{newOp(other, "op-1", operations.OperationNew)}),
		"PutOperations(%s) while an update of %s runs", other, o)

	letGo()
	res := <-updated
	updated <- res // for the deferred wait
	noError(t, res.err, "UpdateRun(%s) let go after the other calls", o)
	wantEqual(t, 7, res.run.ItemsTotal, "ItemsTotal of the run UpdateRun(%s) returned", o)
	wantRun(t, s, res.run)
}

// testAtomicStart checks the optional operations.RunStarter ability, which Run expects
// unless told WithoutRunStarter: the run and its first batch appear together, an
// existing run is refused, a refused batch creates no run; and operations.StartRun,
// whose main run fails, leaves nothing behind.
func testAtomicStart(t tb, s operations.Store) {
	rs, ok := s.(operations.RunStarter)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.RunStarter, so it cannot write a run with its first operations atomically: "+
			"a decorator that embeds the operations.Store it wraps hides that method of the store (build it with decorate.Store, which keeps it), "+
			"and a store that cannot start a run atomically is checked with storetest.WithoutRunStarter()", s)
	}
	o := backup("b")
	ops := newOps(o, "op-", 300, operations.OperationNew)
	noError(t, rs.CreateRunWithOperations(bg, newRun(o), ops), "CreateRunWithOperations(%s, 300 operations)", o)
	wantRun(t, s, newRun(o))
	wantAllOps(t, s, o, ops)

	err := rs.CreateRunWithOperations(bg, newRun(o), newOps(o, "again-", 2, operations.OperationNew))
	wantError(t, err, operations.ErrExists, "a second CreateRunWithOperations(%s)", o)
	wantAllOps(t, s, o, ops)

	r := restore("r")
	bad := newOps(r, "op-", 3, operations.OperationNew)
	bad[2].ID = ""
	err = rs.CreateRunWithOperations(bg, newRun(r), bad)
	wantError(t, err, operations.ErrInvalid, "CreateRunWithOperations(%s) with an operation without an ID", r)
	_, err = s.GetRun(bg, r)
	wantError(t, err, operations.ErrNotFound, "GetRun(%s) after CreateRunWithOperations refused its batch", r)

	// What a caller sees: StartRun whose main run fails writes nothing, so the next call
	// starts afresh.
	started := backup("started")
	errMain := errors.New("main run failed")
	_, err = operations.StartRun(bg, s, newRun(started), func(context.Context) (operations.MainRun, error) { return operations.MainRun{}, errMain })
	wantError(t, err, errMain, "StartRun(%s) whose main run fails", started)
	_, err = s.GetRun(bg, started)
	wantError(t, err, operations.ErrNotFound, "GetRun(%s) after StartRun's main run failed", started)
}

// testStartWithoutRunStarter checks, on a store that is not an operations.RunStarter,
// operations.StartRun, which needs no RunStarter: a main run that fails leaves no run,
// and the next StartRun runs main again and records its operations and the next phase.
func testStartWithoutRunStarter(t tb, s operations.Store) {
	s = struct{ operations.Store }{s} // the store without its optional abilities, even if s has them
	o := backup("b")
	errMain := errors.New("main run failed")
	_, err := operations.StartRun(bg, s, newRun(o), func(context.Context) (operations.MainRun, error) { return operations.MainRun{}, errMain })
	wantError(t, err, errMain, "StartRun(%s) whose main run fails", o)
	_, err = s.GetRun(bg, o)
	wantError(t, err, operations.ErrNotFound, "GetRun(%s) after StartRun's main run failed", o)

	ops := newOps(o, "op-", 3, operations.OperationNew)
	r, err := operations.StartRun(bg, s, newRun(o), func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: cloneOps(ops)}, nil
	})
	noError(t, err, "a second StartRun(%s)", o)
	wantEqual(t, phase.WaitingForPluginOperations, r.Phase, "phase of the run the second StartRun(%s) returned", o)
	wantRun(t, s, r)
	wantAllOps(t, s, o, ops)
}

func second[T any](_ T, err error) error { return err }

// testCancelRequest checks that a cancel request is stored with its run, one-way: a
// second request keeps the first, an update cannot withdraw or change it, and a run that
// has ended cannot be cancelled.
func testCancelRequest(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	got, err := operations.RequestCancel(bg, s, o, "cancelled by jane", at(7))
	noError(t, err, "RequestCancel(%s)", o)
	if !got.CancelRequested() {
		t.Fatalf("RequestCancel(%s) returned a run without a cancel request: %+v", o, got.Cancel)
	}
	wantRun(t, s, got)

	again, err := operations.RequestCancel(bg, s, o, "cancelled again", at(8))
	noError(t, err, "a second RequestCancel(%s)", o)
	wantEqual(t, "cancelled by jane", again.Cancel.Reason, "a second request replaced the first")

	_, err = s.UpdateRun(bg, o, func(r *operations.Run) error { r.Cancel = operations.CancelRequest{}; return nil })
	wantError(t, err, operations.ErrConflict, "an update withdrew the cancel request")
	wantRun(t, s, got)

	done := backup("done")
	mustCreate(t, s, runIn(t, done, phase.Completed, phase.Profile{}))
	_, err = operations.RequestCancel(bg, s, done, "too late", at(9))
	wantError(t, err, operations.ErrRunEnded, "RequestCancel(%s) of a completed run", done)
}

// testStartRunOnce checks that operations.StartRun, called for one owner by several
// goroutines at once (the reconciles of replicas that share the store), runs main once:
// the calls that do not run it return while it still runs, the run InProgress, and the
// run then holds the one main run's operations. It rests on CreateRun's ErrExists and
// on UpdateRun's atomicity.
func testStartRunOnce(t tb, s operations.Store) {
	const callers = 6
	o := backup("once")
	ops := newOps(o, "op-", 3, operations.OperationNew)
	var (
		calls   atomic.Int32
		settled sync.WaitGroup // the calls that do not run main
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		phases  = map[phase.Phase]int{}
	)
	others := make(chan struct{})
	settled.Add(callers - 1)
	go func() { settled.Wait(); close(others) }()
	main := func(context.Context) (operations.MainRun, error) {
		calls.Add(1)
		select {
		case <-others:
		case <-time.After(10 * time.Second): // a guard against hanging when main runs twice
		}
		return operations.MainRun{Operations: cloneOps(ops)}, nil
	}
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := operations.StartRun(bg, s, newRun(o), main)
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			phases[r.Phase]++
			if r.Phase != phase.WaitingForPluginOperations {
				settled.Done()
			}
		}()
	}
	wg.Wait()
	noError(t, errors.Join(errs...), "StartRun(%s) from %d goroutines at once", o, callers)
	wantEqual(t, int32(1), calls.Load(), "main runs of StartRun(%s) from %d goroutines at once", o, callers)
	want := map[phase.Phase]int{phase.InProgress: callers - 1, phase.WaitingForPluginOperations: 1}
	if d := diff(want, phases); d != "" {
		t.Errorf("phases of the runs StartRun(%s) returned (-want +got):\n%s", o, d)
	}
	wantAllOps(t, s, o, ops)
}
