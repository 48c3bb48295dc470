package storetest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func operationChecks() []check {
	return []check{
		{"PutAndGet", testPutAndGet},
		{"PutWithoutRun", testPutWithoutRun},
		{"EmptyBatch", testEmptyBatch},
		{"UpsertKeepsFirstPutOrder", testUpsert},
		{"ReplaceThenGet", testReplaceThenGet},
		{"InvalidBatchWritesNothing", testInvalidBatch},
		{"FinishedStaysFinished", testFinishedStaysFinished},
		{"GetMissing", testGetOperationMissing},
		{"ListWithoutRun", testListOperationsWithoutRun},
		{"ListFilter", testListOperationsFilter},
		{"ListFilterFollowsUpdates", testListFilterFollowsUpdates},
		{"OwnersAreSeparate", testOwnersAreSeparate},
		{"KeepsMonitorState", testKeepsMonitorState},
		{"Counts", testCounts},
	}
}

// testCounts checks, on a store that is an [operations.OperationCounter], that its
// counts are those of the operations ListOperations returns, and its operations those
// ListOperations returns with the same filter, after batches that insert and move
// operations, and that a run that does not exist is ErrNotFound. A store that
// is not one passes.
func testCounts(t tb, s operations.Store) {
	counter, ok := s.(operations.OperationCounter)
	if !ok {
		t.Log("the store is not an operations.OperationCounter")
		return
	}
	ctx := bg
	o := backup("b")
	if _, _, err := counter.CountOperations(ctx, o, operations.OperationFilter{}); !errors.Is(err, operations.ErrNotFound) {
		t.Fatalf("CountOperations of a run that does not exist = %v, want ErrNotFound", err)
	}
	mustCreate(t, s, newRun(o))
	cycle := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	var all []operations.Operation
	for i := range 30 {
		all = append(all, newOp(o, fmt.Sprintf("op-%02d", i), operations.OperationNew))
		if i%3 == 0 {
			all[i] = newOp(o, all[i].ID, cycle[i%len(cycle)])
		}
	}
	want := func(step string) {
		t.Helper()
		listed, err := s.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			t.Fatalf("%s: ListOperations: %v", step, err)
		}
		for _, f := range []operations.OperationFilter{{}, phases(operations.OperationNew, operations.OperationInProgress), phases(operations.OperationFailed)} {
			got, selected, err := counter.CountOperations(ctx, o, f)
			if err != nil {
				t.Fatalf("%s: CountOperations: %v", step, err)
			}
			if w := operations.Count(listed); got != w {
				t.Errorf("%s: CountOperations = %+v, want %+v, the counts of ListOperations", step, got, w)
			}
			want, err := s.ListOperations(ctx, o, f)
			if err != nil {
				t.Fatalf("%s: ListOperations: %v", step, err)
			}
			if diff := cmp.Diff(want, selected, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: the operations of CountOperations with phases %v (-ListOperations +CountOperations):\n%s", step, f.Phases, diff)
			}
		}
	}
	want("no operations")
	for i := 0; i < len(all); i += 8 {
		mustPut(t, s, o, cloneOps(all[i:min(i+8, len(all))]))
	}
	want("after the first batches")
	var moved []operations.Operation
	for _, op := range all {
		if op.Status.Phase == operations.OperationNew {
			moved = append(moved, newOp(o, op.ID, cycle[1+len(moved)%3]))
		}
	}
	mustPut(t, s, o, moved)
	want("after the operations moved")
}

// testKeepsMonitorState checks that a store keeps an operation's MonitorState, each field
// alone and all together, through GetOperation and through ListOperations with and
// without a filter of phases, and that a replacement with a zero state clears it.
func testKeepsMonitorState(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	full := fullMonitorState()
	ops := []operations.Operation{
		newOp(o, "all", operations.OperationInProgress),
		newOp(o, "progress", operations.OperationNew),
		newOp(o, "attempts", operations.OperationInProgress),
		newOp(o, "since", operations.OperationInProgress),
		newOp(o, "next", operations.OperationInProgress),
		newOp(o, "last", operations.OperationInProgress),
		newOp(o, "none", operations.OperationInProgress),
		newOp(o, "max", operations.OperationInProgress),
	}
	ops[0].Monitor = full
	ops[1].Monitor = operations.MonitorState{ProgressAt: full.ProgressAt}
	ops[2].Monitor = operations.MonitorState{Attempts: full.Attempts}
	ops[3].Monitor = operations.MonitorState{ErrorSince: full.ErrorSince}
	ops[4].Monitor = operations.MonitorState{NextPoll: full.NextPoll}
	ops[5].Monitor = operations.MonitorState{LastError: full.LastError}
	ops[7].Monitor = operations.MonitorState{MaxCompleted: full.MaxCompleted}
	mustPut(t, s, o, cloneOps(ops))
	wantAllOps(t, s, o, ops)
	wantOps(t, s, o, phases(operations.OperationNew), ops[1:2])

	ops[0].Monitor, ops[6].Monitor = operations.MonitorState{}, full
	mustPut(t, s, o, cloneOps([]operations.Operation{ops[0], ops[6]}))
	wantAllOps(t, s, o, ops)
	wantOps(t, s, o, phases(operations.OperationInProgress), slices.Concat(ops[:1], ops[2:]))
}

func testPutAndGet(t tb, s operations.Store) {
	for _, o := range []operations.Owner{backup("b"), restore("r")} {
		mustCreate(t, s, newRun(o))
		want := []operations.Operation{
			newOp(o, "op-z", operations.OperationNew),
			newOp(o, "op-a", operations.OperationInProgress),
			newOp(o, "op-m", operations.OperationCompleted),
			newOp(o, "op-f", operations.OperationFailed),
		}
		// A cluster-scoped item with a group, several post-operation items, and a time
		// in another zone.
		want[1].Resource = operations.ResourceIdentifier{Group: "storage.k8s.io", Resource: "storageclasses", Name: "fast"}
		want[1].PostOperationItems = append(want[1].PostOperationItems, operations.ResourceIdentifier{Resource: "pods", Namespace: "app", Name: "p-0"})
		want[2].Status.Updated = at(3).In(time.FixedZone("UTC-7", -7*60*60))
		// The UID of an operation's owner is carried as given.
		want[3].Owner.UID = "an-older-uid"
		// Progress beyond its total is kept as the plugin reported it.
		want[0].Status.NCompleted, want[0].Status.NTotal = 1<<63-1, 1
		mustPut(t, s, o, cloneOps(want))
		wantAllOps(t, s, o, want)
	}
}

func testPutWithoutRun(t tb, s operations.Store) {
	o := backup("b")
	err := s.PutOperations(bg, o, newOps(o, "op-", 3, operations.OperationNew))
	wantError(t, err, operations.ErrNotFound, "PutOperations(%s) without a run", o)

	// Creating the run afterwards shows that nothing was kept.
	mustCreate(t, s, newRun(o))
	wantOps(t, s, o, operations.OperationFilter{}, nil)

	// A run of the other kind with the same name does not count.
	r := restore("b")
	err = s.PutOperations(bg, r, newOps(r, "op-", 1, operations.OperationNew))
	wantError(t, err, operations.ErrNotFound, "PutOperations(%s) beside %s", r, o)
}

func testEmptyBatch(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	for _, ops := range [][]operations.Operation{nil, {}} {
		noError(t, s.PutOperations(bg, o, ops), "PutOperations(%s, %#v)", o, ops)
	}
	wantOps(t, s, o, operations.OperationFilter{}, nil)
	err := s.PutOperations(bg, backup("missing"), nil)
	wantError(t, err, operations.ErrNotFound, "an empty PutOperations without a run")
}

// testReplaceThenGet reads an operation, replaces it, and reads it again, twice: every
// read after a replacement, through GetOperation and ListOperations, returns the
// replacement, as it must from a store (or a decorator) that caches what it read.
func testReplaceThenGet(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	op := newOp(o, "op-1", operations.OperationInProgress)
	mustPut(t, s, o, []operations.Operation{op.Clone()})
	wantAllOps(t, s, o, []operations.Operation{op})

	for _, step := range []struct {
		phase operations.OperationPhase
		done  int64
	}{{operations.OperationInProgress, 50}, {operations.OperationCompleted, 100}} {
		before := op.Clone()
		op.Status.Phase, op.Status.NCompleted, op.Status.Updated = step.phase, step.done, op.Status.Updated.Add(time.Minute)
		mustPut(t, s, o, []operations.Operation{op.Clone()})
		got, err := s.GetOperation(bg, o, op.ID)
		noError(t, err, "GetOperation(%s, %q) after PutOperations replaced it", o, op.ID)
		if diff(before, got) == "" {
			t.Fatalf("GetOperation(%s, %q) after PutOperations replaced it returned the operation as it was before the replacement (%s, NCompleted %d), want %s, NCompleted %d: a stale read",
				o, op.ID, got.Status.Phase, got.Status.NCompleted, op.Status.Phase, op.Status.NCompleted)
		}
		wantAllOps(t, s, o, []operations.Operation{op})
	}
}

func testUpsert(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	a, b, c := newOp(o, "a", operations.OperationNew), newOp(o, "b", operations.OperationNew), newOp(o, "c", operations.OperationInProgress)
	mustPut(t, s, o, []operations.Operation{c.Clone(), a.Clone(), b.Clone()})

	a2 := a.Clone()
	a2.Status.Phase, a2.Status.NCompleted, a2.Status.Description = operations.OperationCompleted, 100, "done"
	a2.PostOperationItems = nil
	c2 := c.Clone()
	c2.Status.NCompleted = 50
	c2.Owner.UID = "another-uid"
	d := newOp(o, "d", operations.OperationNew)
	// Replacements and an insert, in an order unlike the stored one.
	mustPut(t, s, o, []operations.Operation{d.Clone(), a2.Clone(), c2.Clone()})

	// c, a and b keep their places; d, first put now, comes last.
	wantAllOps(t, s, o, []operations.Operation{c2, a2, b, d})

	// Putting the same values again changes nothing.
	mustPut(t, s, o, []operations.Operation{b.Clone(), c2.Clone()})
	wantAllOps(t, s, o, []operations.Operation{c2, a2, b, d})
}

func testInvalidBatch(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	stored := newOps(o, "old-", 3, operations.OperationInProgress)
	mustPut(t, s, o, cloneOps(stored))

	// Each batch replaces stored operations and adds new ones, and has one flaw.
	batch := func() []operations.Operation {
		ops := newOps(o, "new-", 500, operations.OperationNew)
		for i, old := range stored {
			upd := old.Clone()
			upd.Status.Phase = operations.OperationCompleted
			ops[100*i] = upd
		}
		return ops
	}
	tests := []struct {
		name    string
		flaw    func(ops []operations.Operation)
		wantErr error
	}{
		{"500th operation invalid", func(ops []operations.Operation) { ops[499].Status.Phase = "" }, operations.ErrInvalid},
		{"unknown phase", func(ops []operations.Operation) { ops[250].Status.Phase = "Cancelled" }, operations.ErrInvalid},
		{"empty ID", func(ops []operations.Operation) { ops[1].ID = "" }, operations.ErrInvalid},
		{"an ID twice", func(ops []operations.Operation) { ops[498].ID = ops[3].ID }, operations.ErrInvalid},
		{"an ID of a stored operation twice", func(ops []operations.Operation) { ops[498] = ops[0].Clone() }, operations.ErrInvalid},
		{"another owner's operation", func(ops []operations.Operation) { ops[499].Owner = backup("other") }, operations.ErrInvalid},
		{"an operation of the other kind", func(ops []operations.Operation) { ops[499].Owner = restore("b") }, operations.ErrInvalid},
		{"a finished operation moved back", func(ops []operations.Operation) {
			// Only known once the stored operation is read: its first batch completed
			// old-0001 below, so this batch tries to revive it.
			ops[499] = stored[1].Clone()
			ops[499].Status.Phase = operations.OperationInProgress
			ops[100] = newOp(o, "new-0100", operations.OperationNew)
		}, operations.ErrConflict},
	}
	// Complete old-0001 so that the last case has a finished operation to revive.
	stored[1].Status.Phase = operations.OperationCompleted
	mustPut(t, s, o, []operations.Operation{stored[1].Clone()})

	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			ops := batch()
			tc.flaw(ops)
			err := s.PutOperations(bg, o, ops)
			wantError(t, err, tc.wantErr, "PutOperations(%s) of a flawed batch", o)
			wantAllOps(t, s, o, stored)
			for _, id := range []string{"new-0002", "new-0250", "new-0497"} {
				_, err := s.GetOperation(bg, o, id)
				wantError(t, err, operations.ErrNotFound, "GetOperation(%s, %q) after a refused batch", o, id)
			}
			wantOps(t, s, o, phases(operations.OperationNew), nil)
		})
	}
}

func testFinishedStaysFinished(t tb, s operations.Store) {
	o := restore("r")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	done := newOp(o, "done", operations.OperationCompleted)
	failed := newOp(o, "failed", operations.OperationFailed)
	running := newOp(o, "running", operations.OperationInProgress)
	mustPut(t, s, o, []operations.Operation{done.Clone(), failed.Clone(), running.Clone()})

	tests := []struct {
		name string
		op   operations.Operation
		to   operations.OperationPhase
	}{
		{"Completed to InProgress", done, operations.OperationInProgress},
		{"Completed to New", done, operations.OperationNew},
		{"Completed to Failed", done, operations.OperationFailed},
		{"Failed to InProgress", failed, operations.OperationInProgress},
		{"Failed to Completed", failed, operations.OperationCompleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			late := tc.op.Clone()
			late.Status.Phase = tc.to
			progressed := running.Clone()
			progressed.Status.NCompleted = 99
			err := s.PutOperations(bg, o, []operations.Operation{progressed, late, newOp(o, "extra", operations.OperationNew)})
			wantError(t, err, operations.ErrConflict, "PutOperations(%s) moving %q from %s to %s", o, tc.op.ID, tc.op.Status.Phase, tc.to)
			wantAllOps(t, s, o, []operations.Operation{done, failed, running})
		})
	}

	t.Run("a finished operation may change in its own phase", func(t tb) {
		d := done.Clone()
		d.Status.Description = "verified"
		d.Status.Updated = at(30)
		f := failed.Clone()
		f.Status.Error = "plugin said no, twice"
		mustPut(t, s, o, []operations.Operation{d.Clone(), f.Clone()})
		wantAllOps(t, s, o, []operations.Operation{d, f, running})
	})
}

func testGetOperationMissing(t tb, s operations.Store) {
	b, other := backup("b"), backup("other")
	mustCreate(t, s, newRun(b), newRun(other))
	mustPut(t, s, other, []operations.Operation{newOp(other, "op-1", operations.OperationNew)})
	mustPut(t, s, b, []operations.Operation{newOp(b, "op-2", operations.OperationNew)})
	tests := []struct {
		name  string
		owner operations.Owner
		id    string
	}{
		{"no such ID", b, "op-3"},
		{"an ID of another run", b, "op-1"},
		{"an empty ID", b, ""},
		{"no such run", backup("missing"), "op-2"},
		{"the other kind", restore("b"), "op-2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			_, err := s.GetOperation(bg, tc.owner, tc.id)
			wantError(t, err, operations.ErrNotFound, "GetOperation(%s, %q)", tc.owner, tc.id)
		})
	}
}

func testListOperationsWithoutRun(t tb, s operations.Store) {
	mustCreate(t, s, newRun(backup("b")))
	for _, o := range []operations.Owner{backup("c"), restore("b")} {
		for _, f := range []operations.OperationFilter{{}, phases(operations.OperationNew, operations.OperationInProgress)} {
			_, err := s.ListOperations(bg, o, f)
			wantError(t, err, operations.ErrNotFound, "ListOperations(%s, %+v)", o, f)
		}
	}
}

func testListOperationsFilter(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	var all []operations.Operation
	byPhase := map[operations.OperationPhase][]operations.Operation{}
	cycle := []operations.OperationPhase{operations.OperationCompleted, operations.OperationNew, operations.OperationFailed, operations.OperationInProgress, operations.OperationCompleted}
	for i := range 40 {
		op := newOp(o, fmt.Sprintf("op-%02d", 39-i), cycle[i%len(cycle)]) // IDs descending
		all = append(all, op)
		byPhase[op.Status.Phase] = append(byPhase[op.Status.Phase], op)
	}
	for i := 0; i < len(all); i += 7 { // several batches
		mustPut(t, s, o, cloneOps(all[i:min(i+7, len(all))]))
	}
	merge := func(ps ...operations.OperationPhase) []operations.Operation {
		var out []operations.Operation
		for _, op := range all {
			if phases(ps...).Match(op) {
				out = append(out, op)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		filter operations.OperationFilter
		want   []operations.Operation
	}{
		{"zero filter", operations.OperationFilter{}, all},
		{"empty non-nil phases", phases(), all},
		{"New", phases(operations.OperationNew), byPhase[operations.OperationNew]},
		{"InProgress", phases(operations.OperationInProgress), byPhase[operations.OperationInProgress]},
		{"unfinished", phases(operations.OperationNew, operations.OperationInProgress), merge(operations.OperationNew, operations.OperationInProgress)},
		{"unfinished, reversed", phases(operations.OperationInProgress, operations.OperationNew), merge(operations.OperationNew, operations.OperationInProgress)},
		{"Completed", phases(operations.OperationCompleted), byPhase[operations.OperationCompleted]},
		{"finished", phases(operations.OperationFailed, operations.OperationCompleted), merge(operations.OperationFailed, operations.OperationCompleted)},
		{"New and Failed", phases(operations.OperationNew, operations.OperationFailed), merge(operations.OperationNew, operations.OperationFailed)},
		{"a phase listed twice", phases(operations.OperationNew, operations.OperationNew), byPhase[operations.OperationNew]},
		{"every phase", phases(operations.OperationFailed, operations.OperationInProgress, operations.OperationCompleted, operations.OperationNew), all},
		{"an unknown phase", phases("Cancelled"), nil},
		{"an unknown phase beside New", phases("Cancelled", operations.OperationNew), byPhase[operations.OperationNew]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			wantOps(t, s, o, tc.filter, tc.want)
		})
	}
}

// testListFilterFollowsUpdates moves many operations through their phases in batches and
// checks the filtered lists after each batch, so that any index a store keeps by phase
// must follow every change.
func testListFilterFollowsUpdates(t tb, s operations.Store) {
	o := restore("r")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	const n = 300
	ops := newOps(o, "op-", n, operations.OperationNew)
	mustPut(t, s, o, cloneOps(ops))

	check := func(step string) {
		t.Helper()
		var unfinished, inProgress, finished []operations.Operation
		for _, op := range ops {
			switch {
			case op.Status.Phase == operations.OperationInProgress:
				inProgress = append(inProgress, op)
				unfinished = append(unfinished, op)
			case op.Status.Phase == operations.OperationNew:
				unfinished = append(unfinished, op)
			default:
				finished = append(finished, op)
			}
		}
		t.Run(step, func(t tb) {
			wantOps(t, s, o, phases(operations.OperationNew, operations.OperationInProgress), unfinished)
			wantOps(t, s, o, phases(operations.OperationInProgress), inProgress)
			wantOps(t, s, o, phases(operations.OperationCompleted, operations.OperationFailed), finished)
			wantOps(t, s, o, operations.OperationFilter{}, ops)
		})
	}
	check("all New")

	// Each pass starts every third unfinished operation and finishes every operation
	// that was in progress, in one batch, until none is left.
	for pass := 1; ; pass++ {
		var batch []operations.Operation
		k := 0
		for i := range ops {
			switch ops[i].Status.Phase {
			case operations.OperationInProgress:
				if i%5 == 0 {
					ops[i].Status.Phase = operations.OperationFailed
				} else {
					ops[i].Status.Phase = operations.OperationCompleted
				}
				ops[i].Status.NCompleted = ops[i].Status.NTotal
			case operations.OperationNew:
				if k++; k%3 != 0 && pass < 6 {
					continue
				}
				ops[i].Status.Phase = operations.OperationInProgress
			default:
				continue
			}
			batch = append(batch, ops[i].Clone())
		}
		if len(batch) == 0 {
			break
		}
		mustPut(t, s, o, batch)
		check(fmt.Sprintf("pass %d", pass))
	}
	wantOps(t, s, o, phases(operations.OperationNew, operations.OperationInProgress), nil)

	// New operations after all that are listed as unfinished, after the old ones.
	more := newOps(o, "more-", 3, operations.OperationNew)
	mustPut(t, s, o, cloneOps(more))
	ops = append(ops, more...)
	check("three more")
}

func testOwnersAreSeparate(t tb, s operations.Store) {
	owners := []operations.Owner{backup("x"), restore("x"), backup("y")}
	want := map[operations.Owner][]operations.Operation{}
	for i, o := range owners {
		mustCreate(t, s, newRun(o))
		// The same IDs for every owner, with different contents.
		ops := newOps(o, "op-", 3, operations.OperationInProgress)
		for j := range ops {
			ops[j].Status.NCompleted = int64(100*i + j)
		}
		want[o] = ops
		mustPut(t, s, o, cloneOps(ops))
	}
	// Finishing one owner's operation leaves the others' alone.
	done := want[owners[0]][1].Clone()
	done.Status.Phase = operations.OperationCompleted
	mustPut(t, s, owners[0], []operations.Operation{done.Clone()})
	want[owners[0]][1] = done

	for _, o := range owners {
		wantAllOps(t, s, o, want[o])
	}
	wantOps(t, s, owners[1], phases(operations.OperationInProgress), want[owners[1]])
}
