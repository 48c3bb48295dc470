package monitor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestPluginTextsAreCut checks that a plugin whose error, units and description exceed
// operations.MaxTextBytes cannot make the Monitor's writes fail: the texts are stored cut,
// visibly, and the run moves on.
func TestPluginTextsAreCut(t *testing.T) {
	e := newEnv(t)
	huge := strings.Repeat("x", 1<<20)
	longRun := running
	longRun.OperationUnits, longRun.Description = huge, huge
	longFail := broken
	longFail.Err = huge
	e.trackers["p"] = scripted(map[string]operations.Progress{"runs": longRun, "fails": longFail}, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("runs", "fails")...)

	_, err := e.monitor().RunOnce(context.Background())
	require.NoError(t, err)

	cut := func(what, s string) {
		t.Helper()
		if len(s) > operations.MaxTextBytes || !strings.HasSuffix(s, "bytes cut]") || !strings.HasPrefix(s, "xxxx") {
			t.Errorf("%s stored as %d bytes ending %q, want at most %d, cut visibly", what, len(s), s[max(len(s)-20, 0):], operations.MaxTextBytes)
		}
	}
	r := e.op(o, "runs")
	require.Equal(t, operations.OperationInProgress, r.Status.Phase)
	cut("units", r.Status.OperationUnits)
	cut("description", r.Status.Description)
	f := e.op(o, "fails")
	require.Equal(t, operations.OperationFailed, f.Status.Phase)
	cut("error", f.Status.Error)
	require.Equal(t, 1, e.get(o).Errors, "the failure is counted")
}

// TestLongestCancelReason checks that a cancel request with the longest reason allowed
// still fails its run: the Monitor's history entry, which prefixes the reason, is cut.
func TestLongestCancelReason(t *testing.T) {
	e := newEnv(t)
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": running}, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	reason := strings.Repeat("r", operations.MaxTextBytes)
	_, err := operations.RequestCancel(context.Background(), e.store, o, reason, t0)
	require.NoError(t, err)
	_, err = operations.RequestCancel(context.Background(), e.store, operations.Owner{Kind: phase.Backup, Name: "b1"}, reason+"r", t0)
	require.NoError(t, err, "a second request is ignored, whatever its reason")

	_, err = e.monitor().RunOnce(context.Background())
	require.NoError(t, err)
	got := e.get(o)
	require.Equal(t, phase.Failed, got.Phase)
	require.Equal(t, reason, got.FailureReason)
	last := got.History[len(got.History)-1].Reason
	require.LessOrEqual(t, len(last), operations.MaxTextBytes)
	require.True(t, strings.HasSuffix(last, "bytes cut]"), "history reason ends %q", last[len(last)-20:])
}
