package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// Every method of a nil *Store fails with ErrClosed, so that a driver that embeds one
// needs no methods of its own for its zero value.
func TestNilStoreIsClosed(t *testing.T) {
	var s *kv.Store
	run := operations.Run{Owner: owner, Phase: "New"}
	calls := map[string]func() error{
		"CreateRun":               func() error { return s.CreateRun(bg, run) },
		"CreateRunWithOperations": func() error { return s.CreateRunWithOperations(bg, run, nil) },
		"GetRun":                  func() error { _, err := s.GetRun(bg, owner); return err },
		"UpdateRun":               func() error { _, err := s.UpdateRun(bg, owner, func(*operations.Run) error { return nil }); return err },
		"ListRuns":                func() error { _, err := s.ListRuns(bg, operations.RunFilter{}); return err },
		"DeleteRun":               func() error { return s.DeleteRun(bg, owner) },
		"PutOperations":           func() error { return s.PutOperations(bg, owner, nil) },
		"GetOperation":            func() error { _, err := s.GetOperation(bg, owner, "x"); return err },
		"ListOperations":          func() error { _, err := s.ListOperations(bg, owner, operations.OperationFilter{}); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), kv.ErrClosed, "%s of a nil Store", name)
	}
}
