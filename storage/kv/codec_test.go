package kv

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

var (
	fuzzRunOwner = operations.Owner{Kind: phase.Backup, Name: "b"}
	fuzzRun      = func() operations.Run {
		t0 := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		r := operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}, Phase: phase.New, Created: t0,
			OperationTimeout: time.Hour, ItemsTotal: 3, Errors: 1, FailureReason: "why"}
		if err := r.SetPhase(phase.WaitingForPluginOperations, "started", t0.In(time.FixedZone("X", 3600))); err != nil {
			panic(err)
		}
		if err := r.RequestCancel("jane", t0.Local()); err != nil {
			panic(err)
		}
		return r
	}()
	// fuzzRunLocal1 is fuzzRun as earlier builds wrote it, its cancel request's time, in
	// time.Local, of the form timeLocal1.
	fuzzRunLocal1 = func() operations.Run {
		r := fuzzRun.Clone()
		r.Cancel.At = r.Cancel.At.UTC()
		return r
	}()
	fuzzOp = operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}, Action: "a", ID: "op",
		Resource:           operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: "p"},
		PostOperationItems: []operations.ResourceIdentifier{{Resource: "pvc", Name: "x"}},
		Status:             operations.Status{Phase: operations.OperationFailed, Error: "e", NCompleted: 1, NTotal: 2, Created: time.Unix(5, 0).UTC()}}
)

// FuzzDecode feeds the record decoders what a damaged backend might hold: they must
// return a record or an error wrapping operations.ErrCorrupt, never panic, and a record
// they return must encode back to the same bytes (but for times of the read-only form
// timeLocal1, which encode as timeUTC), bytes that decode and encode to themselves.
func FuzzDecode(f *testing.F) {
	f.Add(appendRun(nil, &fuzzRun))
	f.Add(appendOperation(nil, &fuzzOp))
	f.Add([]byte{runFormat1})
	f.Add([]byte{opFormat1, codeNew, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(withTimeLocal1(appendRun(nil, &fuzzRunLocal1), fuzzRunLocal1.Cancel.At, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := decoder{b: b}
		if r, err := d.run(fuzzRunOwner); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("decodeRun error %v does not wrap ErrCorrupt", err)
			}
		} else if again := appendRun(nil, &r); d.timesLocal1 == 0 && string(again) != string(b) {
			t.Fatalf("run record %x decodes to %+v, which encodes to %x", b, r, again)
		} else if r2, err := decodeRun(fuzzRunOwner, again); err != nil || string(appendRun(nil, &r2)) != string(again) {
			t.Fatalf("run record %x decodes to %+v, which encodes to %x, which does not decode to the same: %+v, %v", b, r, again, r2, err)
		}
		d = decoder{b: b}
		if op, err := d.operation(fuzzRunOwner); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("decodeOperation error %v does not wrap ErrCorrupt", err)
			}
		} else if op.Validate() == nil {
			if again := appendOperation(nil, &op); d.timesLocal1 == 0 && string(again) != string(b) {
				t.Fatalf("operation record %x decodes to %+v, which encodes to %x", b, op, again)
			} else if op2, err := decodeOperation(fuzzRunOwner, again); err != nil || string(appendOperation(nil, &op2)) != string(again) {
				t.Fatalf("operation record %x decodes to %+v, which encodes to %x, which does not decode to the same: %+v, %v", b, op, again, op2, err)
			}
		}
		if _, err := parseChunk(b); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("parseChunk error %v does not wrap ErrCorrupt", err)
		}
		if _, err := parseOpsMeta(b); err != nil && !errors.Is(err, operations.ErrCorrupt) {
			t.Fatalf("parseOpsMeta error %v does not wrap ErrCorrupt", err)
		}
	})
}

// Every field of a run and of an operation survives the encoding, the cancel request
// and times in three kinds of location included.
func TestRecordRoundTrip(t *testing.T) {
	r, err := decodeRun(fuzzRun.Owner, appendRun(nil, &fuzzRun))
	if err != nil {
		t.Fatal(err)
	}
	// A time in time.Local comes back in a fixed zone of the same name and offset.
	eq := cmp.Comparer(func(a, b time.Time) bool { return zonedOf(a) == zonedOf(b) })
	if d := cmp.Diff(fuzzRun, r, eq); d != "" {
		t.Errorf("run round trip (-want +got):\n%s", d)
	}
	op, err := decodeOperation(fuzzOp.Owner, appendOperation(nil, &fuzzOp))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fuzzOp, op, eq); d != "" {
		t.Errorf("operation round trip (-want +got):\n%s", d)
	}
}

// withTimeLocal1 returns rec, whose last time, written after tail bytes, is t in UTC,
// with that time written as earlier builds wrote a time in time.Local: in the form
// timeLocal1, which names no zone.
func withTimeLocal1(rec []byte, t time.Time, tail int) []byte {
	at := len(rec) - tail - len(appendTime(nil, t))
	if rec[at] != timeUTC {
		panic(fmt.Sprintf("byte %d of %x is not a time in UTC", at, rec))
	}
	out := bytes.Clone(rec)
	out[at] = timeLocal1
	return out
}

// zoned is what a test compares of a time: the instant, and the name and offset of the
// zone it is in.
type zoned struct {
	Unix   int64
	Nano   int
	Zone   string
	Offset int
}

func zonedOf(t time.Time) zoned {
	name, offset := t.Zone()
	return zoned{t.Unix(), t.Nanosecond(), name, offset}
}

// A time decodes to the same instant in the same zone in every process, whatever its
// time.Local: a time that was in the writer's time.Local keeps the writer's zone, as a
// fixed zone, and a time of the read-only form timeLocal1, whose writer's zone the
// record does not name, decodes in UTC.
func TestTimesDecodeTheSameEverywhere(t *testing.T) {
	saved := time.Local
	t.Cleanup(func() { time.Local = saved })
	writer, reader := time.FixedZone("WRITER", 5*3600+1800), time.FixedZone("READER", -7*3600)
	t0 := time.Date(2025, 6, 7, 8, 9, 10, 11, time.UTC)

	time.Local = writer
	op := operations.Operation{Owner: fuzzOp.Owner, ID: "op", Status: operations.Status{Phase: operations.OperationNew,
		Created: t0.Local(), Started: t0.In(time.FixedZone("FIXED", -60)), Updated: t0}}
	rec := appendOperation(nil, &op)
	old := op
	old.Status = operations.Status{Phase: operations.OperationNew, Created: t0}
	// Created, then the zero Started and Updated, one byte each.
	oldRec := withTimeLocal1(appendOperation(nil, &old), t0, 2)

	want := []zoned{
		{t0.Unix(), 11, "WRITER", 5*3600 + 1800},
		{t0.Unix(), 11, "FIXED", -60},
		{t0.Unix(), 11, "UTC", 0},
		{t0.Unix(), 11, "UTC", 0}, // timeLocal1
	}
	for _, local := range []*time.Location{writer, reader} {
		time.Local = local
		got, err := decodeOperation(op.Owner, rec)
		require.NoError(t, err)
		gotOld, err := decodeOperation(op.Owner, oldRec)
		require.NoError(t, err)
		times := []zoned{zonedOf(got.Status.Created), zonedOf(got.Status.Started), zonedOf(got.Status.Updated), zonedOf(gotOld.Status.Created)}
		if d := cmp.Diff(want, times); d != "" {
			t.Errorf("times decoded with time.Local %s (-want +got):\n%s", local, d)
		}
	}
}

// The operations metadata of format 1, which ended with a chunk count, still reads.
func TestOpsMetaFormat1(t *testing.T) {
	old := []byte{opsMetaFormat1, 7, 3, 5, 2} // next 7, batches 3, staged 5, 2 chunks
	got, err := parseOpsMeta(old)
	require.NoError(t, err)
	want := opsMetaValue{next: 7, batches: 3, staged: 5}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(opsMetaValue{})); d != "" {
		t.Errorf("format 1 metadata (-want +got):\n%s", d)
	}
	again, err := parseOpsMeta(got.append(nil))
	require.NoError(t, err)
	if d := cmp.Diff(want, again, cmp.AllowUnexported(opsMetaValue{})); d != "" {
		t.Errorf("metadata written again (-want +got):\n%s", d)
	}
}

// TestZonesAreShared checks that decoding times of one zone gives them one
// *time.Location, made once, so that a time in a zone costs no more allocations than one
// in UTC; and that a store of many zones does not grow the cache beyond its bound, each
// time still decoding in its own zone.
func TestZonesAreShared(t *testing.T) {
	at := func(name string, offset int) *operations.Operation {
		op := fuzzOp
		op.Status.Created = time.Unix(1700000000, 5).In(time.FixedZone(name, offset))
		return &op
	}
	zoned, inUTC := appendOperation(nil, at("CEST", 7200)), appendOperation(nil, at("UTC", 0))
	first, err := decodeOperation(fuzzOp.Owner, zoned)
	require.NoError(t, err)
	second, err := decodeOperation(fuzzOp.Owner, zoned)
	require.NoError(t, err)
	require.Same(t, first.Status.Created.Location(), second.Status.Created.Location())
	decode := func(rec []byte) func() {
		return func() {
			if _, err := decodeOperation(fuzzOp.Owner, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	require.Equal(t, testing.AllocsPerRun(100, decode(inUTC)), testing.AllocsPerRun(100, decode(zoned)))

	for i := range 3 * maxCachedZones {
		name, offset := fmt.Sprintf("Z%d", i), (i%48-24)*1800
		op, err := decodeOperation(fuzzOp.Owner, appendOperation(nil, at(name, offset)))
		require.NoError(t, err)
		gotName, gotOffset := op.Status.Created.Zone()
		require.Equal(t, [2]any{name, offset}, [2]any{gotName, gotOffset})
	}
	zones.mu.RLock()
	defer zones.mu.RUnlock()
	require.LessOrEqual(t, zones.n, maxCachedZones)
}
