package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// checkSet fails for every field of v (a struct, recursively) left at its zero value, so
// that a field added to Run or Operation later is covered by the round trips of the suite
// and a backend that forgets to store it fails.
func checkSet(t *testing.T, v reflect.Value, path string, skip map[string]bool) {
	t.Helper()
	if skip[path] {
		return
	}
	if tm, ok := v.Interface().(time.Time); ok {
		if tm.IsZero() {
			t.Errorf("fixture leaves %s unset", path)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			checkSet(t, v.Field(i), path+"."+v.Type().Field(i).Name, skip)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("fixture leaves %s empty", path)
		}
		for i := range v.Len() {
			checkSet(t, v.Index(i), path+"[]", skip)
		}
	default:
		if v.IsZero() {
			t.Errorf("fixture leaves %s unset", path)
		}
	}
}

func TestFixturesSetEveryField(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "uid"}
	// Profile.Queue is a backup option; fullRun of a restore sets the other one. Base and
	// Phases are set only for kinds of one's own, whose runs the check OwnKinds writes
	// (its Migration names its phases).
	checkSet(t, reflect.ValueOf(fullRun(o)), "Run", map[string]bool{"Run.Profile.Queue": true, "Run.Profile.RestoreFinalizing": true, "Run.Profile.Base": true, "Run.Profile.Phases": true})
	checkSet(t, reflect.ValueOf(fullRun(operations.Owner{Kind: phase.Restore, Name: "r", UID: "uid"})).FieldByName("Profile"), "Profile", map[string]bool{"Profile.Queue": true, "Profile.Base": true, "Profile.Phases": true})
	// Group is empty for core resources, as it is for PVCs; Error is set only on failure.
	// Monitor is zero unless a Monitor has a policy: the check KeepsMonitorState sets it
	// from fullMonitorState.
	skip := map[string]bool{"Operation.Resource.Group": true, "Operation.Monitor": true}
	checkSet(t, reflect.ValueOf(newOp(o, "op", operations.OperationFailed)), "Operation", skip)
	checkSet(t, reflect.ValueOf(fullMonitorState()), "MonitorState", nil)
}
