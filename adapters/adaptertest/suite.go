package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
)

// A FinishFunc makes the operation operationID end, for instance by advancing the fake
// clock the plugin runs on past the operation's end. It may fail the test through the t
// its harness was given.
type FinishFunc func(operationID string)

// unknownID is an operation ID no plugin should know.
const unknownID = "adaptertest-unknown-operation-id"

// BackupItemActionHarness tells [RunBackupItemAction] how to make and drive the action
// under test.
type BackupItemActionHarness[B any] struct {
	// New returns a fresh action, and the function that makes its operations end, or
	// nil when the action starts no operations (an adapted v1 action). It is called once
	// per subtest, and once before them, and registers its own cleanup with t.Cleanup.
	// Required.
	New func(t *testing.T) (adapters.BackupItemAction[B], FinishFunc)
	// Backup is passed to every call.
	Backup B
	// Item is what Execute is given; it must make the action start an operation when
	// New returns a FinishFunc. Nil means a ConfigMap "adaptertest/item".
	Item runtime.Unstructured
}

// RunBackupItemAction checks a backup item action against the v2 contract, in one
// subtest per rule, each on an action from h.New:
//
//   - Name is not empty;
//   - with a FinishFunc: Execute returns a new operation ID at each call; Progress of it
//     succeeds with a sound report (counts not negative, no Err before completion;
//     NCompleted may exceed NTotal, as an estimated total lets it, and the Monitor
//     records it so); once finished, Progress keeps reporting it completed,
//     with the same Err and counts; Cancel of a finished operation returns nil and
//     changes nothing; Cancel of a running one returns nil; Progress of an unknown ID
//     returns an error wrapping [operations.ErrInvalidOperationID], and Cancel of one
//     returns nil or such an error;
//   - without a FinishFunc: Execute returns no operation ID and no post-operation
//     items; Progress of any ID returns an error wrapping
//     [operations.ErrAsyncOperationsNotSupported]; Cancel returns nil.
func RunBackupItemAction[B any](t *testing.T, h BackupItemActionHarness[B]) {
	t.Helper()
	if h.New == nil {
		t.Fatal("adaptertest: BackupItemActionHarness.New is nil")
	}
	item := h.Item
	if item == nil {
		item = defaultItem()
	}
	started := "Execute of " + describe(item, h.Item == nil)
	run(t, false, func(t *testing.T) subject {
		a, finish := h.New(t)
		return subject{
			name:    a.Name(),
			started: started,
			start: func(ctx context.Context) (string, error) {
				_, _, id, post, err := a.Execute(ctx, item, h.Backup)
				if err == nil && id == "" && len(post) > 0 {
					t.Errorf("%s returned post-operation items %v without an operation ID", started, post)
				}
				if err == nil && finish == nil && len(post) > 0 {
					t.Errorf("%s, an action without operations, returned post-operation items %v", started, post)
				}
				return id, err
			},
			progress: func(ctx context.Context, id string) (operations.Progress, error) {
				return a.Progress(ctx, id, h.Backup)
			},
			cancel: func(ctx context.Context, id string) error { return a.Cancel(ctx, id, h.Backup) },
			finish: finish,
		}
	})
}

// RestoreItemActionHarness tells [RunRestoreItemAction] how to make and drive the action
// under test.
type RestoreItemActionHarness[R any] struct {
	// New returns a fresh action, and the function that makes its operations end, or
	// nil when the action starts no operations. It is called once per subtest, and once
	// before them, and registers its own cleanup with t.Cleanup. Required.
	New func(t *testing.T) (adapters.RestoreItemAction[R], FinishFunc)
	// Restore is passed to every call.
	Restore R
	// Item is Execute's input Item and ItemFromBackup; it must make the action start an
	// operation when New returns a FinishFunc. Nil means a ConfigMap "adaptertest/item".
	Item runtime.Unstructured
}

// RunRestoreItemAction checks a restore item action against the v2 contract, with the
// rules of [RunBackupItemAction], Execute's operation ID being its output's OperationID.
// Without a FinishFunc it also checks that the output does not ask to wait for
// additional items.
func RunRestoreItemAction[R any](t *testing.T, h RestoreItemActionHarness[R]) {
	t.Helper()
	if h.New == nil {
		t.Fatal("adaptertest: RestoreItemActionHarness.New is nil")
	}
	item := h.Item
	if item == nil {
		item = defaultItem()
	}
	started := "Execute of " + describe(item, h.Item == nil)
	run(t, false, func(t *testing.T) subject {
		a, finish := h.New(t)
		return subject{
			name:    a.Name(),
			started: started,
			start: func(ctx context.Context) (string, error) {
				out, err := a.Execute(ctx, adapters.RestoreItemActionInput[R]{Item: item, ItemFromBackup: item, Restore: h.Restore})
				if err == nil && finish == nil && out.WaitForAdditionalItems {
					t.Errorf("%s, an action without operations, asked to wait for additional items", started)
				}
				return out.OperationID, err
			},
			progress: func(ctx context.Context, id string) (operations.Progress, error) {
				return a.Progress(ctx, id, h.Restore)
			},
			cancel: func(ctx context.Context, id string) error { return a.Cancel(ctx, id, h.Restore) },
			finish: finish,
		}
	})
}

// VolumeSnapshotterHarness tells [RunVolumeSnapshotter] how to make and drive the
// snapshotter under test.
type VolumeSnapshotterHarness struct {
	// New returns a fresh snapshotter, initialised, and the function that makes its
	// snapshots' operations end, or nil when its snapshots are complete when
	// CreateSnapshot returns (an adapted v1 snapshotter). It is called once per subtest,
	// and once before them, and registers its own cleanup with t.Cleanup. Required.
	New func(t *testing.T) (adapters.VolumeSnapshotter, FinishFunc)
	// VolumeID and VolumeAZ are what CreateSnapshot is given.
	VolumeID, VolumeAZ string
}

// RunVolumeSnapshotter checks a volume snapshotter against the v2 contract, with the
// rules of [RunBackupItemAction], CreateSnapshot standing for Execute and the snapshot
// ID for the operation ID; CreateSnapshot must return a snapshot ID whether or not the
// snapshotter has a FinishFunc.
func RunVolumeSnapshotter(t *testing.T, h VolumeSnapshotterHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("adaptertest: VolumeSnapshotterHarness.New is nil")
	}
	started := fmt.Sprintf("CreateSnapshot(%q, %q)", h.VolumeID, h.VolumeAZ)
	run(t, true, func(t *testing.T) subject {
		s, finish := h.New(t)
		return subject{
			name:    s.Name(),
			started: started,
			start: func(ctx context.Context) (string, error) {
				return s.CreateSnapshot(ctx, h.VolumeID, h.VolumeAZ, map[string]string{"adaptertest": "true"})
			},
			progress: s.Progress,
			cancel:   s.Cancel,
			finish:   finish,
		}
	})
}

// subject is a plugin under test, seen through the methods the rules need.
type subject struct {
	name     string
	started  string // what start calls, for the failure messages: "Execute of ConfigMap ..."
	start    func(ctx context.Context) (operationID string, err error)
	progress func(ctx context.Context, id string) (operations.Progress, error)
	cancel   func(ctx context.Context, id string) error
	finish   FinishFunc // nil: the plugin runs no operations
}

// run runs the rules on subjects from newSubject. alwaysID says that start returns an ID
// even when the plugin runs no operations (a snapshot ID).
func run(t *testing.T, alwaysID bool, newSubject func(t *testing.T) subject) {
	t.Helper()
	ctx := context.Background()
	// Each subtest says, first, how it starts operations, so that a failure shows which
	// item (or volume) the plugin was given.
	fresh := newSubject
	newSubject = func(t *testing.T) subject {
		s := fresh(t)
		t.Logf("adaptertest: plugin %q; operations are started by %s", s.name, s.started)
		return s
	}

	t.Run("NameNotEmpty", func(t *testing.T) {
		if s := newSubject(t); s.name == "" {
			t.Error("Name() is empty")
		}
	})

	// started starts an operation and fails the test unless it has an ID.
	started := func(t *testing.T, s subject) string {
		t.Helper()
		id, err := s.start(ctx)
		if err != nil {
			t.Fatalf("%s, to start an operation, returned the error %q, want none", s.started, err)
		}
		if id == "" {
			t.Fatalf("%s, to start an operation, returned no operation ID", s.started)
		}
		return id
	}

	if s := fresh(t); s.finish == nil {
		t.Run("NoOperations", func(t *testing.T) {
			s := newSubject(t)
			id, err := s.start(ctx)
			switch {
			case err != nil:
				t.Fatalf("%s returned the error %q, want none", s.started, err)
			case alwaysID && id == "":
				t.Fatalf("%s returned no snapshot ID", s.started)
			case !alwaysID && id != "":
				t.Fatalf("%s returned the operation ID %q from a plugin without operations, want none", s.started, id)
			}
			if id == "" {
				id = unknownID
			}
			if _, err := s.progress(ctx, id); !errors.Is(err, operations.ErrAsyncOperationsNotSupported) {
				t.Errorf("Progress(%q) returned %s, want an error wrapping operations.ErrAsyncOperationsNotSupported", id, errText(err))
			}
		})
		t.Run("CancelHarmless", func(t *testing.T) {
			s := newSubject(t)
			if err := s.cancel(ctx, unknownID); err != nil {
				t.Errorf("Cancel(%q) returned %s, want none", unknownID, errText(err))
			}
		})
		return
	}

	t.Run("ProgressUnknownID", func(t *testing.T) {
		s := newSubject(t)
		if _, err := s.progress(ctx, unknownID); !errors.Is(err, operations.ErrInvalidOperationID) {
			t.Errorf("Progress(%q) of an unknown ID returned %s, want an error wrapping operations.ErrInvalidOperationID", unknownID, errText(err))
		}
	})
	t.Run("CancelUnknownID", func(t *testing.T) {
		s := newSubject(t)
		if err := s.cancel(ctx, unknownID); err != nil && !errors.Is(err, operations.ErrInvalidOperationID) {
			t.Errorf("Cancel(%q) of an unknown ID returned %s, want none or one wrapping operations.ErrInvalidOperationID", unknownID, errText(err))
		}
	})
	t.Run("DistinctIDs", func(t *testing.T) {
		s := newSubject(t)
		if a, b := started(t, s), started(t, s); a == b {
			t.Errorf("%s, called twice, returned the operation ID %q both times, want a new one each time", s.started, a)
		}
	})
	t.Run("ProgressRunning", func(t *testing.T) {
		s := newSubject(t)
		id := started(t, s)
		p, err := s.progress(ctx, id)
		if err != nil {
			t.Fatalf("Progress(%q) of a started operation returned %s, want none", id, errText(err))
		}
		checkReport(t, id, p)
	})
	t.Run("FinishedStaysCompleted", func(t *testing.T) {
		s := newSubject(t)
		id := started(t, s)
		s.finish(id)
		first := finished(t, s, id)
		for i := 0; i < 3; i++ {
			if diff := cmp.Diff(endOf(first), endOf(finished(t, s, id))); diff != "" {
				t.Errorf("Progress(%q), call %d after the operation finished, reported another end than the first call (-first +this):\n%s", id, i+2, diff)
			}
		}
	})
	t.Run("CancelFinished", func(t *testing.T) {
		s := newSubject(t)
		id := started(t, s)
		s.finish(id)
		before := finished(t, s, id)
		if err := s.cancel(ctx, id); err != nil {
			t.Errorf("Cancel(%q) of a finished operation returned %s, want none", id, errText(err))
		}
		if diff := cmp.Diff(endOf(before), endOf(finished(t, s, id))); diff != "" {
			t.Errorf("Progress(%q) after Cancel of the finished operation reported another end (-before +after):\n%s", id, diff)
		}
	})
	t.Run("CancelRunning", func(t *testing.T) {
		s := newSubject(t)
		id := started(t, s)
		if err := s.cancel(ctx, id); err != nil {
			t.Errorf("Cancel(%q) of a running operation returned %s, want none", id, errText(err))
		}
		p, err := s.progress(ctx, id)
		if err != nil {
			t.Fatalf("Progress(%q) after Cancel returned %s, want none (the ID must stay valid)", id, errText(err))
		}
		checkReport(t, id, p)
	})
}

// finished returns the report of an operation that has ended, failing the test unless
// it says so.
func finished(t *testing.T, s subject, id string) operations.Progress {
	t.Helper()
	p, err := s.progress(context.Background(), id)
	if err != nil {
		t.Fatalf("Progress(%q) of a finished operation returned %s, want none", id, errText(err))
	}
	if !p.Completed {
		t.Fatalf("Progress(%q) after the operation finished returned %+v, want Completed", id, p)
	}
	checkReport(t, id, p)
	return p
}

// checkReport fails the test when p cannot be true.
func checkReport(t *testing.T, id string, p operations.Progress) {
	t.Helper()
	switch {
	case p.Validate() != nil:
		t.Errorf("Progress(%q) returned %+v: %v", id, p, p.Validate())
	case !p.Completed && p.Err != "":
		t.Errorf("Progress(%q) returned %+v, with Err set on an operation not completed", id, p)
	}
}

// end is what two reports of a finished operation must agree on.
type end struct {
	Completed          bool
	Err                string
	NCompleted, NTotal int64
}

func endOf(p operations.Progress) end {
	return end{Completed: p.Completed, Err: p.Err, NCompleted: p.NCompleted, NTotal: p.NTotal}
}

// errText describes err in a failure message.
func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return fmt.Sprintf("the error %q", err)
}

// describe names item in failure messages: kind, namespace and name, and whether it is
// the default item.
func describe(item runtime.Unstructured, isDefault bool) string {
	u := unstructured.Unstructured{Object: item.UnstructuredContent()}
	name := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	s := fmt.Sprintf("%s %q", u.GetKind(), name)
	if isDefault {
		s += " (the default item: the harness's Item is nil)"
	}
	return s
}

// defaultItem returns the item Execute is given when the harness names none.
func defaultItem() runtime.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]interface{}{"namespace": "adaptertest", "name": "item"},
	}}
}
