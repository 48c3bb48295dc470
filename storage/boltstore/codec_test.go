package boltstore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func TestOperationRecordRoundTrip(t *testing.T) {
	o := backup("b")
	full := newOp(o, "op-1", operations.OperationInProgress)
	full.PostOperationItems = []operations.ResourceIdentifier{{Group: "g", Resource: "r", Namespace: "ns", Name: "n"}, {Resource: "pods", Name: "p"}}
	full.Status = operations.Status{
		Phase: operations.OperationFailed, Error: "boom <&>", NCompleted: -1, NTotal: 1 << 62,
		OperationUnits: "Bytes", Description: "copying \u2028 data",
		Created: t0, Started: t0.Add(time.Nanosecond), Updated: t0.Add(time.Hour),
	}
	tests := []struct {
		name string
		op   operations.Operation
	}{
		{name: "minimal", op: operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, ID: "x", Status: operations.Status{Phase: operations.OperationNew}}},
		{name: "every field", op: full},
		{name: "empty, not nil, post-operation items", op: func() operations.Operation {
			op := newOp(o, "e", operations.OperationCompleted)
			op.PostOperationItems = []operations.ResourceIdentifier{}
			return op
		}()},
		{name: "restore", op: newOp(restore("r"), "r-1", operations.OperationNew)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := appendOperation(nil, &tc.op)
			code, err := recordCode(b)
			require.NoError(t, err)
			require.Equal(t, phaseCode(tc.op.Status.Phase), code, "recordCode")
			got, err := decodeOperation(ownerKey(tc.op.Owner), b)
			require.NoError(t, err)
			// cmp compares times with Equal; TestTimesKeepInstantAndLocation checks locations.
			if diff := cmp.Diff(tc.op, got); diff != "" {
				t.Errorf("decodeOperation(appendOperation(op)) (-want +got):\n%s", diff)
			}
			require.Equal(t, tc.op.PostOperationItems == nil, got.PostOperationItems == nil, "nil PostOperationItems")
		})
	}
}

func TestRunRecordRoundTrip(t *testing.T) {
	o := restore("r")
	withHistory := operations.Run{Owner: o, Phase: phase.New, Profile: phase.Profile{RestoreFinalizing: true}, Created: t0, ItemsTotal: 10, ItemsDone: 3, Errors: 1, Warnings: -2, OperationTimeout: time.Hour, FailureReason: "why"}
	require.NoError(t, withHistory.SetPhase(phase.WaitingForPluginOperations, "operations pending", t0.Add(time.Second)))
	queued := operations.Run{Owner: backup("b"), Phase: phase.Queued, Profile: phase.Profile{Queue: true}, History: []operations.Transition{}}
	tests := []struct {
		name string
		run  operations.Run
	}{
		{name: "zero times and nil history", run: operations.Run{Owner: o, Phase: phase.New}},
		{name: "history and profile", run: withHistory},
		{name: "empty, not nil, history", run: queued},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRun(ownerKey(tc.run.Owner), appendRun(nil, &tc.run))
			require.NoError(t, err)
			if diff := cmp.Diff(tc.run, got); diff != "" {
				t.Errorf("decodeRun(appendRun(r)) (-want +got):\n%s", diff)
			}
			require.Equal(t, tc.run.History == nil, got.History == nil, "nil History")
		})
	}
}

func TestTimesKeepInstantAndLocation(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		in   time.Time
		want *time.Location // nil: time.UTC
	}{
		{name: "zero", in: time.Time{}},
		{name: "UTC", in: t0},
		{name: "UTC from UTC()", in: time.Unix(1671019200, 5).UTC()},
		{name: "local", in: t0.Local(), want: time.Local},
		{name: "fixed zone", in: t0.In(paris), want: paris},
		{name: "before 1970", in: time.Date(1900, 1, 1, 0, 0, 0, 999999999, time.UTC)},
		{name: "monotonic reading dropped", in: time.Now(), want: time.Local},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decoder{b: appendTime(nil, tc.in)}
			got := d.tm()
			require.NoError(t, d.end())
			if !got.Equal(tc.in) {
				t.Errorf("decoded %v, want the instant %v", got, tc.in)
			}
			if tc.in.IsZero() {
				require.True(t, got.IsZero(), "zero time")
				return
			}
			wantName, wantOffset := tc.in.Zone()
			gotName, gotOffset := got.Zone()
			if gotName != wantName || gotOffset != wantOffset {
				t.Errorf("zone = %s%+d, want %s%+d", gotName, gotOffset, wantName, wantOffset)
			}
			if tc.want == time.Local && got.Location() != time.Local {
				t.Errorf("location = %v, want Local", got.Location())
			}
			if tc.want == nil && got.Location() != time.UTC {
				t.Errorf("location = %v, want UTC", got.Location())
			}
			if got != got.Round(0) {
				t.Errorf("decoded time carries a monotonic reading")
			}
		})
	}
}

func TestDecodeRefusesDamage(t *testing.T) {
	op := newOp(backup("b"), "op-1", operations.OperationInProgress)
	good := appendOperation(nil, &op)
	run := newRun(backup("b"), phase.InProgress)
	goodRun := appendRun(nil, &run)
	tests := []struct {
		name string
		run  bool
		b    []byte
	}{
		{name: "empty operation", b: nil},
		{name: "operation format 2", b: append([]byte{2}, good[1:]...)},
		{name: "operation phase code 0", b: append([]byte{opFormat1, 0}, good[2:]...)},
		{name: "operation cut short", b: good[:len(good)-1]},
		{name: "operation with a trailing byte", b: append(bytes.Clone(good), 0)},
		{name: "huge list count", b: []byte{opFormat1, codeNew, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0}}, // seven empty strings, then the count
		{name: "bad varint", b: []byte{opFormat1, codeNew, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{name: "empty run", run: true, b: nil},
		{name: "run format 0", run: true, b: append([]byte{0}, goodRun[1:]...)},
		{name: "run cut short", run: true, b: goodRun[:len(goodRun)-2]},
		{name: "run with unknown profile flags", run: true, b: func() []byte {
			b := bytes.Clone(goodRun)
			b[1+(1+5)+(1+10)] = 0x80 // format, UID "uid-b", phase "InProgress", then the flags
			return b
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.run {
				_, err = decodeRun(ownerKey(backup("b")), tc.b)
			} else {
				_, err = decodeOperation(ownerKey(backup("b")), tc.b)
			}
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// FuzzDecode checks that no input makes a decoder panic, and that whatever decodes
// re-encodes to a record that decodes to the same value.
func FuzzDecode(f *testing.F) {
	op := newOp(backup("b"), "op-1", operations.OperationInProgress)
	op.PostOperationItems = []operations.ResourceIdentifier{{Resource: "pods", Name: "p"}}
	op.Status.Updated = t0.In(time.FixedZone("X", -7200))
	f.Add(appendOperation(nil, &op))
	run := newRun(restore("r"), phase.New)
	require.NoError(f, run.SetPhase(phase.InProgress, "go", t0))
	f.Add(appendRun(nil, &run))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		o := ownerKey(backup("b"))
		if op, err := decodeOperation(o, b); err == nil {
			again, err := decodeOperation(o, appendOperation(nil, &op))
			require.NoError(t, err)
			if diff := cmp.Diff(op, again); diff != "" {
				t.Errorf("operation round trip (-first +second):\n%s", diff)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeOperation error %v does not wrap ErrCorrupt", err)
		}
		for _, o := range []operations.Owner{ownerKey(backup("b")), ownerKey(restore("r"))} {
			if r, err := decodeRun(o, b); err == nil {
				again, err := decodeRun(o, appendRun(nil, &r))
				require.NoError(t, err)
				if diff := cmp.Diff(r, again); diff != "" {
					t.Errorf("run round trip (-first +second):\n%s", diff)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Errorf("decodeRun error %v does not wrap ErrCorrupt", err)
			}
		}
	})
}
