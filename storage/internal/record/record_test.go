package record

import (
	"bytes"
	"encoding/binary"
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
	// fuzzOpState is fuzzOp with every field of a Monitor's state set, one time in a
	// zone other than UTC.
	fuzzOpState = func() operations.Operation {
		op := fuzzOp.Clone()
		op.Status.Phase = operations.OperationInProgress
		op.Monitor = operations.MonitorState{ProgressAt: time.Unix(60, 7).UTC(), Attempts: 3,
			ErrorSince: time.Unix(90, 0).In(time.FixedZone("X", 3600)), NextPoll: time.Unix(150, 0).UTC(), LastError: "unavailable",
			MaxCompleted: 2}
		return op
	}()
)

// FuzzDecode feeds the record decoders what a damaged backend might hold: they must
// return a record or an error wrapping operations.ErrCorrupt, never panic, and a record
// they return must encode back to the same bytes (but for times of the read-only form
// timeLocal1, which encode as timeUTC), bytes that decode and encode to themselves.
func FuzzDecode(f *testing.F) {
	f.Add(AppendRun(nil, &fuzzRun))
	f.Add(AppendOperation(nil, &fuzzOp))
	f.Add(AppendOperation(nil, &fuzzOpState))
	f.Add([]byte{runFormat1})
	f.Add([]byte{opFormat1, codeNew, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(withTimeLocal1(AppendRun(nil, &fuzzRunLocal1), fuzzRunLocal1.Cancel.At, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		if r, err := d.run(fuzzRunOwner); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("DecodeRun error %v does not wrap ErrCorrupt", err)
			}
		} else if again := AppendRun(nil, &r); d.timesLocal1 == 0 && string(again) != string(b) {
			t.Fatalf("run record %x decodes to %+v, which encodes to %x", b, r, again)
		} else if r2, err := DecodeRun(fuzzRunOwner, again); err != nil || string(AppendRun(nil, &r2)) != string(again) {
			t.Fatalf("run record %x decodes to %+v, which encodes to %x, which does not decode to the same: %+v, %v", b, r, again, r2, err)
		}
		d = NewDecoder(b)
		if op, err := d.operation(fuzzRunOwner); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("DecodeOperation error %v does not wrap ErrCorrupt", err)
			}
		} else if op.Validate() == nil {
			if again := AppendOperation(nil, &op); d.timesLocal1 == 0 && string(again) != string(b) {
				t.Fatalf("operation record %x decodes to %+v, which encodes to %x", b, op, again)
			} else if op2, err := DecodeOperation(fuzzRunOwner, again); err != nil || string(AppendOperation(nil, &op2)) != string(again) {
				t.Fatalf("operation record %x decodes to %+v, which encodes to %x, which does not decode to the same: %+v, %v", b, op, again, op2, err)
			}
		}
	})
}

// Every field of a run and of an operation survives the encoding, the cancel request
// and times in three kinds of location included.
func TestRecordRoundTrip(t *testing.T) {
	r, err := DecodeRun(fuzzRun.Owner, AppendRun(nil, &fuzzRun))
	if err != nil {
		t.Fatal(err)
	}
	// A time in time.Local comes back in a fixed zone of the same name and offset.
	eq := cmp.Comparer(func(a, b time.Time) bool { return zonedOf(a) == zonedOf(b) })
	if d := cmp.Diff(fuzzRun, r, eq); d != "" {
		t.Errorf("run round trip (-want +got):\n%s", d)
	}
	op, err := DecodeOperation(fuzzOp.Owner, AppendOperation(nil, &fuzzOp))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fuzzOp, op, eq); d != "" {
		t.Errorf("operation round trip (-want +got):\n%s", d)
	}
}

// TestOperationMonitorState checks the record of an operation with a Monitor's state
// (opFormat2): each field survives alone and with the others; a zero state writes the
// record of opFormat1, byte for byte; OperationCode reads the phase of both; and every
// cut of the record, and every other value of each of its bytes, either fails with
// ErrCorrupt or decodes to an operation that encodes to exactly those bytes (but for a
// time of the read-only form timeLocal1), so that each record has one encoding.
func TestOperationMonitorState(t *testing.T) {
	full := fuzzOpState.Monitor
	states := map[string]operations.MonitorState{
		"all":           full,
		"progress at":   {ProgressAt: full.ProgressAt},
		"attempts":      {Attempts: full.Attempts},
		"error since":   {ErrorSince: full.ErrorSince},
		"next poll":     {NextPoll: full.NextPoll},
		"last error":    {LastError: full.LastError},
		"max completed": {MaxCompleted: full.MaxCompleted},
	}
	eq := cmp.Comparer(func(a, b time.Time) bool { return zonedOf(a) == zonedOf(b) })
	plain := fuzzOpState.Clone()
	plain.Monitor = operations.MonitorState{}
	plainRec := AppendOperation(nil, &plain)
	require.Equal(t, byte(opFormat1), plainRec[0])
	for name, ms := range states {
		op := fuzzOpState.Clone()
		op.Monitor = ms
		rec := AppendOperation(nil, &op)
		require.Equal(t, byte(opFormat2), rec[0], name)
		require.Equal(t, plainRec[1:], rec[1:len(plainRec)], "%s: the fields of format 1 come first, as format 1 writes them", name)
		got, err := DecodeOperation(op.Owner, rec)
		require.NoError(t, err, name)
		if d := cmp.Diff(op, got, eq); d != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", name, d)
		}
		code, err := OperationCode(rec)
		require.NoError(t, err, name)
		require.Equal(t, operations.OperationInProgress, CodePhases[code], name)
	}

	// The changes below decode times in many zones: leave the cache of zones empty, as
	// TestZonesAreShared expects to find it.
	t.Cleanup(func() {
		zones.mu.Lock()
		zones.names, zones.n = nil, 0
		zones.mu.Unlock()
	})
	rec := AppendOperation(nil, &fuzzOpState)
	for n := range len(rec) {
		_, err := DecodeOperation(fuzzOpState.Owner, rec[:n])
		require.ErrorIs(t, err, operations.ErrCorrupt, "cut at %d of %d bytes", n, len(rec))
	}
	changed := 0
	for i := range rec {
		for v := range 256 {
			if byte(v) == rec[i] {
				continue
			}
			b := bytes.Clone(rec)
			b[i] = byte(v)
			d := NewDecoder(b)
			got, err := d.operation(fuzzOpState.Owner)
			if err != nil {
				require.ErrorIs(t, err, operations.ErrCorrupt, "byte %d set to %#x", i, v)
				continue
			}
			changed++
			// A time of the read-only form timeLocal1 encodes again as timeUTC.
			if again := AppendOperation(nil, &got); d.timesLocal1 == 0 && !bytes.Equal(again, b) {
				t.Fatalf("byte %d set to %#x: the record decodes to %+v, which encodes to %x, not %x", i, v, got, again, b)
			}
		}
	}
	require.NotZero(t, changed, "some changes decode (a count, a letter of a text)")

	// A byte of fields that is zero or has an unknown bit; a field written as zero.
	at := len(plainRec) // the byte of fields
	for _, bad := range [][]byte{
		append(bytes.Clone(plainRec[:at]), 0),
		append(bytes.Clone(plainRec[:at]), stateFields+1),
		append(bytes.Clone(plainRec[:at]), stateAttempts, 0),
		append(bytes.Clone(plainRec[:at]), stateNextPoll, timeZero),
		append(bytes.Clone(plainRec[:at]), stateLastError, 0),
		append(bytes.Clone(plainRec[:at]), stateMaxCompleted, 0),
	} {
		bad[0] = opFormat2
		_, err := DecodeOperation(fuzzOpState.Owner, bad)
		require.ErrorIs(t, err, operations.ErrCorrupt, "%x", bad[at:])
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
	rec := AppendOperation(nil, &op)
	old := op
	old.Status = operations.Status{Phase: operations.OperationNew, Created: t0}
	// Created, then the zero Started and Updated, one byte each.
	oldRec := withTimeLocal1(AppendOperation(nil, &old), t0, 2)

	want := []zoned{
		{t0.Unix(), 11, "WRITER", 5*3600 + 1800},
		{t0.Unix(), 11, "FIXED", -60},
		{t0.Unix(), 11, "UTC", 0},
		{t0.Unix(), 11, "UTC", 0}, // timeLocal1
	}
	for _, local := range []*time.Location{writer, reader} {
		time.Local = local
		got, err := DecodeOperation(op.Owner, rec)
		require.NoError(t, err)
		gotOld, err := DecodeOperation(op.Owner, oldRec)
		require.NoError(t, err)
		times := []zoned{zonedOf(got.Status.Created), zonedOf(got.Status.Started), zonedOf(got.Status.Updated), zonedOf(gotOld.Status.Created)}
		if d := cmp.Diff(want, times); d != "" {
			t.Errorf("times decoded with time.Local %s (-want +got):\n%s", local, d)
		}
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
	zoned, inUTC := AppendOperation(nil, at("CEST", 7200)), AppendOperation(nil, at("UTC", 0))
	first, err := DecodeOperation(fuzzOp.Owner, zoned)
	require.NoError(t, err)
	second, err := DecodeOperation(fuzzOp.Owner, zoned)
	require.NoError(t, err)
	require.Same(t, first.Status.Created.Location(), second.Status.Created.Location())
	decode := func(rec []byte) func() {
		return func() {
			if _, err := DecodeOperation(fuzzOp.Owner, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	require.Equal(t, testing.AllocsPerRun(100, decode(inUTC)), testing.AllocsPerRun(100, decode(zoned)))

	for i := range 3 * maxCachedZones {
		name, offset := fmt.Sprintf("Z%d", i), (i%48-24)*1800
		op, err := DecodeOperation(fuzzOp.Owner, AppendOperation(nil, at(name, offset)))
		require.NoError(t, err)
		gotName, gotOffset := op.Status.Created.Zone()
		require.Equal(t, [2]any{name, offset}, [2]any{gotName, gotOffset})
	}
	zones.mu.RLock()
	defer zones.mu.RUnlock()
	require.LessOrEqual(t, zones.n, maxCachedZones)
}

// TestRunRecordKeepsTheBase: a run record keeps the base of its kind's profile, and one
// whose base does not fit the kind its key names does not decode.
func TestRunRecordKeepsTheBase(t *testing.T) {
	for _, base := range []phase.Kind{phase.Backup, phase.Restore} {
		p, err := phase.Declare("DB", base, phase.WithQueue(), phase.WithRestoreFinalizing())
		require.NoError(t, err)
		r := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a", UID: "u"}, Phase: phase.New, Profile: p}
		got, err := DecodeRun(r.Owner, AppendRun(nil, &r))
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(r, got))

		// The same record under Backup's or Restore's key, or a kind's without a base.
		for _, o := range []operations.Owner{{Kind: phase.Backup, Name: "a"}, {Kind: phase.Restore, Name: "a"}} {
			if o.Kind == base {
				continue
			}
			_, err = DecodeRun(o, AppendRun(nil, &r))
			require.ErrorIs(t, err, operations.ErrCorrupt, "%s following %s", o.Kind, base)
		}
	}
	plain := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a"}, Phase: phase.New}
	_, err := DecodeRun(plain.Owner, AppendRun(nil, &plain))
	require.ErrorIs(t, err, operations.ErrCorrupt)
	require.ErrorIs(t, err, phase.ErrUnknownKind)

	// Both bases at once is no profile.
	rec := AppendRun(nil, &operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "a"}, Phase: phase.New})
	flags := len(appendString(appendString([]byte{runFormat1}, ""), "New")) // after format, UID and phase
	require.Zero(t, rec[flags])
	rec[flags] = profileBaseBackup | profileBaseRestore
	_, err = DecodeRun(plain.Owner, rec)
	require.ErrorIs(t, err, operations.ErrCorrupt)

	// A kind declared with its phases keeps them; a set that is empty or that no
	// declaration gives is refused.
	few := []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations,
		phase.WaitingForPluginOperationsPartiallyFailed, phase.Completed, phase.PartiallyFailed, phase.Failed}
	p, err := phase.Declare("DB", phase.Backup, phase.WithPhases(few...))
	require.NoError(t, err)
	r := operations.Run{Owner: operations.Owner{Kind: "DB", Name: "a", UID: "u"}, Phase: phase.New, Profile: p}
	got, err := DecodeRun(r.Owner, AppendRun(nil, &r))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(r, got))
	for _, set := range []phase.Set{0, phase.SetOf(phase.New, phase.Completed)} {
		rec := AppendRun(nil, &operations.Run{Owner: r.Owner, Phase: phase.New, Profile: phase.Profile{Base: phase.Backup, Phases: phase.SetOf(few...)}})
		flags := len(appendString(appendString([]byte{runFormat1}, "u"), "New"))
		require.Equal(t, byte(profileBaseBackup|profilePhases), rec[flags])
		n := len(binary.AppendUvarint(nil, uint64(phase.SetOf(few...))))
		rec = append(append(rec[:flags+1:flags+1], binary.AppendUvarint(nil, uint64(set))...), rec[flags+1+n:]...)
		_, err = DecodeRun(r.Owner, rec)
		require.ErrorIs(t, err, operations.ErrCorrupt, "phases %s", set)
	}
}
