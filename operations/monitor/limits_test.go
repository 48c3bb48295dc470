package monitor_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/opsfile"
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

// TestPluginTimesOutOfRange checks that a plugin cannot make a run's operations
// unwritable with a time outside years 0000 to 9999 in UTC: each report with such a
// Started or Updated time, running or completed, fails its own operation with an error
// naming the field and the time, and records nothing of the report; reports with times
// at the ends of the range are recorded as they were made. The run ends, a second pass
// has nothing to do, and the run's operations are written to an itemoperations file and
// read back as stored.
func TestPluginTimesOutOfRange(t *testing.T) {
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	bad := map[string]time.Time{
		"at the first instant of year 10000": last.Add(time.Second),
		"at the last instant of year -1":     first.Add(-1),
		"in year 9999 in its zone, not UTC":  time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("west", -3600)),
		"in year 0 in its zone, not UTC":     time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("east", 3600)),
		"far in the future":                  time.Unix(1<<62, 0),
		"far in the past":                    time.Unix(-1<<62, 0),
	}
	e := newEnv(t)
	answers := map[string]operations.Progress{}
	wantErr := map[string]string{}
	var ids []string
	for what, tm := range bad {
		for _, field := range []string{"started", "updated"} {
			for _, completed := range []bool{false, true} {
				id := fmt.Sprintf("%s %s, completed %v", field, what, completed)
				p := running
				if completed {
					p = done
				}
				if field == "started" {
					p.Started = tm
				} else {
					p.Updated = tm
				}
				answers[id], ids = p, append(ids, id)
				wantErr[id] = fmt.Sprintf("progress: plugin reported %s time %s outside years 0000 to 9999 in UTC: invalid record", field, tm.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	atEnds := done
	atEnds.Started, atEnds.Updated = first, last
	inZone := done
	inZone.Updated = time.Date(10000, 1, 1, 0, 30, 0, 0, time.FixedZone("east", 3600)) // 9999-12-31T23:30:00Z
	answers["at the ends"], answers["in range in UTC"] = atEnds, inZone
	ids = append(ids, "at the ends", "in range in UTC")
	e.trackers["p"] = scripted(answers, nil)
	o := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{}, ops(ids...)...)
	m := e.monitor()

	_, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	for id, msg := range wantErr {
		want := operations.Status{Phase: operations.OperationFailed, Error: msg, Created: t0}
		if diff := cmp.Diff(want, e.op(o, id).Status); diff != "" {
			t.Errorf("operation %q (-want +got):\n%s", id, diff)
		}
	}
	want := operations.Status{Phase: operations.OperationCompleted, NCompleted: 100, NTotal: 100, OperationUnits: "Bytes", Created: t0, Started: first, Updated: last}
	if diff := cmp.Diff(want, e.op(o, "at the ends").Status); diff != "" {
		t.Errorf("operation reporting times at the ends of the range (-want +got):\n%s", diff)
	}
	want.Started, want.Updated = started, time.Date(9999, 12, 31, 23, 30, 0, 0, time.UTC)
	if diff := cmp.Diff(want, e.op(o, "in range in UTC").Status); diff != "" {
		t.Errorf("operation reporting a time in year 10000 in its zone, 9999 in UTC (-want +got):\n%s", diff)
	}
	r := e.get(o)
	require.Equal(t, phase.PartiallyFailed, r.Phase, "the run ends")
	require.Equal(t, len(wantErr), r.Errors)

	stats, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, monitor.PassStats{Start: t0}, stats, "a second pass: no run waits, none changes")

	stored, err := e.store.ListOperations(context.Background(), o, operations.OperationFilter{})
	require.NoError(t, err)
	var file bytes.Buffer
	require.NoError(t, opsfile.Encode(&file, stored), "Encode of the run's operations")
	read, err := opsfile.Decode(&file)
	require.NoError(t, err)
	if diff := cmp.Diff(stored, read); diff != "" {
		t.Errorf("the run's operations read back from their file (-stored +read):\n%s", diff)
	}
}
