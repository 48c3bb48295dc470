package storetest

import (
	"github.com/itemops/itemops/operations"
)

// RunClosed checks that every method of the operations.Store contract fails on s with an
// error wrapping want, as it must on a store that was closed (or on the zero value of a
// store type that documents it so), and CreateRunWithOperations too when s is an
// operations.RunStarter. The calls are valid ones, so an error other than want is the
// store's.
func RunClosed[T TB[T]](t T, s operations.Store, want error) {
	t.Helper()
	o := backup("closed")
	run := newRun(backup("other"))
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateRun", func() error { return s.CreateRun(bg, run) }},
		{"GetRun", func() error { _, err := s.GetRun(bg, o); return err }},
		{"UpdateRun", func() error {
			_, err := s.UpdateRun(bg, o, func(*operations.Run) error { return nil })
			return err
		}},
		{"ListRuns", func() error { _, err := s.ListRuns(bg, operations.RunFilter{}); return err }},
		{"ListRuns of an unknown kind", func() error {
			_, err := s.ListRuns(bg, operations.RunFilter{Kind: "Snapshot"})
			return err
		}},
		{"DeleteRun", func() error { return s.DeleteRun(bg, o) }},
		{"PutOperations", func() error {
			return s.PutOperations(bg, o, []operations.Operation{newOp(o, "x", operations.OperationNew)})
		}},
		{"GetOperation", func() error { _, err := s.GetOperation(bg, o, "x"); return err }},
		{"ListOperations", func() error {
			_, err := s.ListOperations(bg, o, operations.OperationFilter{})
			return err
		}},
	}
	if rs, ok := s.(operations.RunStarter); ok {
		calls = append(calls, struct {
			name string
			call func() error
		}{"CreateRunWithOperations", func() error {
			return rs.CreateRunWithOperations(bg, run, []operations.Operation{newOp(run.Owner, "x", operations.OperationNew)})
		}})
	}
	for _, c := range calls {
		t.Run(c.name, func(t T) {
			wantError(t, c.call(), want, "%s", c.name)
		})
	}
}
