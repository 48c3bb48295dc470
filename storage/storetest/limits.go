package storetest

import (
	"strings"
	"time"

	"github.com/itemops/itemops/operations"
)

// testLimits checks that a store refuses, with operations.ErrInvalid and writing
// nothing, every name longer than operations.MaxNameBytes, every text longer than
// operations.MaxTextBytes, an operation whose names and post-operation items exceed
// operations.MaxSpecBytes together, and an operation with a time outside years 0000 to
// 9999 in UTC; and that it stores the times at the ends of that range as they are.
// (Whether the largest names and texts allowed fit depends on the size of one write of
// the backend as well; the drivers' own tests check that.)
func testLimits(t tb, s operations.Store) {
	longName := strings.Repeat("n", operations.MaxNameBytes+1)
	longText := strings.Repeat("t", operations.MaxTextBytes+1)
	refused := func(what string, err error) {
		t.Helper()
		if msg := errorMismatch(err, operations.ErrInvalid, what); msg != "" {
			t.Error(msg)
		}
	}

	// Runs: a name, a UID, and each text a run holds.
	refused("CreateRun with a name one byte too long", s.CreateRun(bg, newRun(backup(longName))))
	uid := backup("long-uid")
	uid.UID = longName
	refused("CreateRun with a UID one byte too long", s.CreateRun(bg, newRun(uid)))
	for what, edit := range map[string]func(*operations.Run){
		"failure reason": func(r *operations.Run) { r.FailureReason = longText },
		"history reason": func(r *operations.Run) { r.History[0].Reason = longText },
		"cancel reason":  func(r *operations.Run) { r.Cancel.Reason = longText },
	} {
		r := fullRun(backup("text"))
		edit(&r)
		refused("CreateRun with a "+what+" one byte too long", s.CreateRun(bg, r))
	}
	wantRuns(t, s, operations.RunFilter{}, nil)

	o := backup("b")
	mustCreate(t, s, newRun(o))
	_, err := s.UpdateRun(bg, o, func(r *operations.Run) error { r.FailureReason = longText; return nil })
	refused("UpdateRun adding a failure reason one byte too long", err)
	_, err = s.UpdateRun(bg, o, func(r *operations.Run) error {
		r.History = append(r.History, operations.Transition{From: r.Phase, To: r.Phase, Event: operations.EventCancelRequested, Time: at(1), Reason: longText})
		r.Cancel = operations.CancelRequest{Reason: "x", At: at(1)}
		return nil
	})
	refused("UpdateRun adding a history entry whose reason is one byte too long", err)
	_, err = operations.RequestCancel(bg, s, o, longText, at(1))
	refused("RequestCancel with a reason one byte too long", err)
	wantRun(t, s, newRun(o))

	// Operations: each name and each text an operation holds.
	for what, edit := range map[string]func(*operations.Operation){
		"ID":                  func(op *operations.Operation) { op.ID = longName },
		"action":              func(op *operations.Operation) { op.Action = longName },
		"resource name":       func(op *operations.Operation) { op.Resource.Name = longName },
		"post-operation item": func(op *operations.Operation) { op.PostOperationItems[0].Namespace = longName },
		"error":               func(op *operations.Operation) { op.Status.Error = longText },
		"operation units":     func(op *operations.Operation) { op.Status.OperationUnits = longText },
		"description":         func(op *operations.Operation) { op.Status.Description = longText },
		"names and post-operation items": func(op *operations.Operation) {
			// Each item counts 64 bytes beyond its fields.
			op.PostOperationItems = make([]operations.ResourceIdentifier, operations.MaxSpecBytes/64+1)
		},
	} {
		op := newOp(o, "op", operations.OperationFailed)
		edit(&op)
		refused("PutOperations with an operation over the limit of its "+what, s.PutOperations(bg, o, []operations.Operation{op}))
	}
	wantAllOps(t, s, o, nil)

	// Operations: each time, one nanosecond beyond either end of years 0000 to 9999 in
	// UTC, in UTC and in a zone where its year is in that range.
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	east, west := time.FixedZone("east", 3600), time.FixedZone("west", -3600)
	for what, set := range map[string]func(*operations.Status, time.Time){
		"created": func(st *operations.Status, tm time.Time) { st.Created = tm },
		"started": func(st *operations.Status, tm time.Time) { st.Started = tm },
		"updated": func(st *operations.Status, tm time.Time) { st.Updated = tm },
	} {
		for _, tm := range []time.Time{first.Add(-1), first.Add(-1).In(east), last.Add(1), last.Add(1).In(west)} {
			op := newOp(o, "op", operations.OperationInProgress)
			set(&op.Status, tm)
			refused("PutOperations with the "+what+" time "+tm.Format(time.RFC3339Nano), s.PutOperations(bg, o, []operations.Operation{op}))
		}
	}
	wantAllOps(t, s, o, nil)
	ends := newOp(o, "ends", operations.OperationInProgress)
	ends.Status.Created, ends.Status.Started, ends.Status.Updated = first, last, first.In(west)
	mustPut(t, s, o, []operations.Operation{ends})
	wantAllOps(t, s, o, []operations.Operation{ends})
}
