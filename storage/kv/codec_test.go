package kv

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	fuzzOp = operations.Operation{Owner: operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}, Action: "a", ID: "op",
		Resource:           operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: "p"},
		PostOperationItems: []operations.ResourceIdentifier{{Resource: "pvc", Name: "x"}},
		Status:             operations.Status{Phase: operations.OperationFailed, Error: "e", NCompleted: 1, NTotal: 2, Created: time.Unix(5, 0).UTC()}}
)

// FuzzDecode feeds the record decoders what a damaged backend might hold: they must
// return a record or an error wrapping operations.ErrCorrupt, never panic, and a record
// they return must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(appendRun(nil, &fuzzRun))
	f.Add(appendOperation(nil, &fuzzOp))
	f.Add([]byte{runFormat1})
	f.Add([]byte{opFormat1, codeNew, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRun(fuzzRunOwner, b); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("decodeRun error %v does not wrap ErrCorrupt", err)
			}
		} else if again := appendRun(nil, &r); string(again) != string(b) {
			t.Fatalf("run record %x decodes to %+v, which encodes to %x", b, r, again)
		}
		if op, err := decodeOperation(fuzzRunOwner, b); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) {
				t.Fatalf("decodeOperation error %v does not wrap ErrCorrupt", err)
			}
		} else if op.Validate() == nil {
			if again := appendOperation(nil, &op); string(again) != string(b) {
				t.Fatalf("operation record %x decodes to %+v, which encodes to %x", b, op, again)
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
	eq := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) && a.Location().String() == b.Location().String() })
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
