package opsfile_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/memstore"
)

// atLimit returns the two operations at the limits of package operations that stress
// the codec most, each with names and post-operation items of exactly
// operations.MaxSpecBytes:
//
//   - "largest record": every name and text at its limit and made of '<', which the
//     encoder writes as six bytes (\u003c), the rest of the bytes in as few items as
//     hold them, the longest phase, the largest counts and times in year 9999;
//   - "most items": one-byte names and as many empty post-operation items as fit.
func atLimit() map[string]operations.Operation {
	name := strings.Repeat("<", operations.MaxNameBytes)
	text := strings.Repeat("<", operations.MaxTextBytes)
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	largest := operations.Operation{
		Owner:    operations.Owner{Kind: phase.Backup, Name: name, UID: name},
		Action:   name,
		Resource: operations.ResourceIdentifier{Group: name, Resource: name, Namespace: name, Name: name},
		ID:       name,
		Status: operations.Status{Phase: operations.OperationInProgress, Error: text, NCompleted: 1<<63 - 1, NTotal: 1<<63 - 1,
			OperationUnits: text, Description: text, Created: last, Started: last, Updated: last},
	}
	left := operations.MaxSpecBytes - 8*operations.MaxNameBytes
	for left > 0 {
		n := min(left-itemBytes, 4*operations.MaxNameBytes)
		left -= itemBytes + n
		var f [4]string
		for k := range f {
			m := min(n, operations.MaxNameBytes)
			f[k], n = name[:m], n-m
		}
		largest.PostOperationItems = append(largest.PostOperationItems, operations.ResourceIdentifier{Group: f[0], Resource: f[1], Namespace: f[2], Name: f[3]})
	}

	most := operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b"}, Action: "a", ID: "i",
		Status: operations.Status{Phase: operations.OperationNew}}
	left = operations.MaxSpecBytes - 3
	most.PostOperationItems = make([]operations.ResourceIdentifier, left/itemBytes)
	most.PostOperationItems[0].Name = strings.Repeat("n", left%itemBytes)
	return map[string]operations.Operation{"largest record": largest, "most items": most}
}

// itemBytes is what operations.MaxSpecBytes counts for each post-operation item beyond
// its fields, as its documentation says.
const itemBytes = 64

// stores returns the stores of this module, each empty: a boltstore on disk, and a
// memstore but under -short. Both are drivers of storage/kv, which checks the limits for
// them; CI's long step runs both.
func stores(t *testing.T) map[string]operations.Store {
	b, err := boltstore.Open(filepath.Join(t.TempDir(), "db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	if testing.Short() {
		return map[string]operations.Store{"boltstore": b}
	}
	return map[string]operations.Store{"memstore": memstore.New(), "boltstore": b}
}

// TestOperationsAtTheLimitsRoundTrip checks that what a store accepts, the codec writes
// and reads back with its default limits: each operation at the limits is stored, read
// back, encoded, and decoded with the defaults to an equal operation. The same
// operation with one item more or one byte more is refused by the store with
// operations.ErrInvalid, naming the limit, and by the encoder alike, and the store keeps
// what it had; so is an operation of 5,000 items of 4 KiB.
func TestOperationsAtTheLimitsRoundTrip(t *testing.T) {
	ctx := context.Background()
	for name, want := range atLimit() {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, want.Validate())
			overItems := want.Clone()
			overItems.PostOperationItems = append(overItems.PostOperationItems, operations.ResourceIdentifier{})
			overBytes := want.Clone()
			overBytes.PostOperationItems[len(overBytes.PostOperationItems)-1].Name += "<"
			big := want.Clone()
			big.PostOperationItems = make([]operations.ResourceIdentifier, 5000)
			for i := range big.PostOperationItems {
				big.PostOperationItems[i] = operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: strings.Repeat("p", 4<<10)}
			}
			refused := map[string]operations.Operation{"one item more": overItems, "one byte more": overBytes, "5,000 items of 4 KiB": big}

			for store, s := range stores(t) {
				t.Run(store, func(t *testing.T) {
					require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: want.Owner, Phase: phase.New}))
					require.NoError(t, s.PutOperations(ctx, want.Owner, []operations.Operation{want.Clone()}))
					stored, err := s.GetOperation(ctx, want.Owner, want.ID)
					require.NoError(t, err)
					if diff := cmp.Diff(want, stored); diff != "" {
						t.Fatalf("the operation as stored (-want +got):\n%s", diff)
					}

					var file bytes.Buffer
					require.NoError(t, opsfile.Encode(&file, []operations.Operation{stored}))
					got, err := opsfile.Decode(bytes.NewReader(file.Bytes()))
					require.NoError(t, err, "Decode with the default limits")
					if diff := cmp.Diff([]operations.Operation{want}, got); diff != "" {
						t.Errorf("Decode(Encode(the stored operation)) (-want +got):\n%s", diff)
					}

					for what, op := range refused {
						err := s.PutOperations(ctx, want.Owner, []operations.Operation{op})
						require.ErrorIs(t, err, operations.ErrInvalid, "PutOperations of the operation with %s", what)
						require.ErrorContains(t, err, "MaxSpecBytes", "PutOperations of the operation with %s", what)
						require.ErrorIs(t, opsfile.Encode(&bytes.Buffer{}, []operations.Operation{op}), operations.ErrInvalid, "Encode of the operation with %s", what)
					}
					stored, err = s.GetOperation(ctx, want.Owner, want.ID)
					require.NoError(t, err)
					if diff := cmp.Diff(want, stored); diff != "" {
						t.Errorf("the stored operation after the refused writes (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// TestLargestRecordIsWithinTheBound checks the bound that the default record limit is
// checked against at compile time (maxRecordText, in decode.go) with the record of the
// largest operation: the record fits it, and a record limit one byte below the record
// refuses it, so the record is what the decoder measures.
func TestLargestRecordIsWithinTheBound(t *testing.T) {
	var file bytes.Buffer
	require.NoError(t, opsfile.Encode(&file, []operations.Operation{atLimit()["largest record"]}))
	record := len(gunzip(t, file.Bytes())) - len("[]\n")
	require.LessOrEqual(t, record, opsfile.MaxRecordText)
	require.LessOrEqual(t, opsfile.MaxRecordText, opsfile.DefaultRecordSizeLimit)

	_, err := opsfile.Decode(bytes.NewReader(file.Bytes()), opsfile.WithRecordSizeLimit(int64(record)))
	require.NoError(t, err, "a record limit of the record's length")
	_, err = opsfile.Decode(bytes.NewReader(file.Bytes()), opsfile.WithRecordSizeLimit(int64(record-1)))
	require.ErrorIs(t, err, opsfile.ErrTooLarge, "a record limit of the record's length less one")
	t.Logf("the largest record: %d bytes; the bound: %d; the default limit: %d", record, opsfile.MaxRecordText, opsfile.DefaultRecordSizeLimit)
}

// TestTimesAtTheLimitsRoundTrip checks that every time a store accepts, the codec writes
// and reads back. Operations whose times (Created, Started, Updated) lie at the ends of
// the range, years 0000 to 9999 in UTC, in UTC or in other zones, are stored in a
// memstore and in a boltstore on disk, read back, encoded, and decoded with the default
// limits to equal operations (a time with a fraction of a second is read back to the
// second, as the file holds it). Each field set one nanosecond or one second beyond
// either end, in UTC or in another zone, is refused by the store with
// operations.ErrInvalid, naming the field, and by the encoder alike, and the store keeps
// what it had.
func TestTimesAtTheLimitsRoundTrip(t *testing.T) {
	ctx := context.Background()
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	lastSecond := last.Truncate(time.Second)
	east, west := time.FixedZone("east", 3600), time.FixedZone("west", -3600)
	op := func(created, started, updated time.Time) operations.Operation {
		return operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}, Action: "a", ID: "i",
			Status: operations.Status{Phase: operations.OperationInProgress, Created: created, Started: started, Updated: updated}}
	}
	accepted := []struct {
		name     string
		op       operations.Operation
		readBack operations.Operation // what Decode returns
	}{
		{"the first instant", op(first, first, first), op(first, first, first)},
		{"the last whole second", op(lastSecond, lastSecond, lastSecond), op(lastSecond, lastSecond, lastSecond)},
		{"the last instant", op(last, last, last), op(lastSecond, lastSecond, lastSecond)},
		// Year -1 and year 10000 in their zones, years 0000 and 9999 in UTC.
		{"the ends in other zones", op(first.In(west), lastSecond.In(east), time.Time{}), op(first, lastSecond, time.Time{})},
	}
	beyond := map[string]time.Time{
		"one nanosecond before the range": first.Add(-1),
		"one second before the range":     first.Add(-time.Second),
		"one nanosecond after the range":  last.Add(1),
		"one second after the range":      last.Add(time.Second),
		// Year 0000 and year 9999 in their zones, years -1 and 10000 in UTC.
		"one nanosecond before the range, in a zone": first.Add(-1).In(east),
		"one nanosecond after the range, in a zone":  last.Add(1).In(west),
	}
	fields := map[string]func(*operations.Operation, time.Time){
		"created": func(op *operations.Operation, t time.Time) { op.Status.Created = t },
		"started": func(op *operations.Operation, t time.Time) { op.Status.Started = t },
		"updated": func(op *operations.Operation, t time.Time) { op.Status.Updated = t },
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.op.Validate())
			for store, s := range stores(t) {
				t.Run(store, func(t *testing.T) {
					require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: tc.op.Owner, Phase: phase.New}))
					require.NoError(t, s.PutOperations(ctx, tc.op.Owner, []operations.Operation{tc.op}))
					stored, err := s.GetOperation(ctx, tc.op.Owner, tc.op.ID)
					require.NoError(t, err)
					if diff := cmp.Diff(tc.op, stored); diff != "" {
						t.Fatalf("the operation as stored (-want +got):\n%s", diff)
					}

					var file bytes.Buffer
					require.NoError(t, opsfile.Encode(&file, []operations.Operation{stored}))
					got, err := opsfile.Decode(bytes.NewReader(file.Bytes()))
					require.NoError(t, err, "Decode with the default limits")
					if diff := cmp.Diff([]operations.Operation{tc.readBack}, got); diff != "" {
						t.Errorf("Decode(Encode(the stored operation)) (-want +got):\n%s", diff)
					}

					for field, set := range fields {
						for what, tm := range beyond {
							bad := stored
							set(&bad, tm)
							err := s.PutOperations(ctx, tc.op.Owner, []operations.Operation{bad})
							require.ErrorIs(t, err, operations.ErrInvalid, "PutOperations with the %s time %s", field, what)
							require.ErrorContains(t, err, field+" time "+tm.UTC().Format(time.RFC3339Nano)+" outside years 0000 to 9999 in UTC")
							err = opsfile.Encode(&bytes.Buffer{}, []operations.Operation{bad})
							require.ErrorIs(t, err, operations.ErrInvalid, "Encode with the %s time %s", field, what)
						}
					}
					after, err := s.GetOperation(ctx, tc.op.Owner, tc.op.ID)
					require.NoError(t, err)
					if diff := cmp.Diff(tc.op, after); diff != "" {
						t.Errorf("the stored operation after the refused writes (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}
