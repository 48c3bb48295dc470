package boltstore_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// writeFixture makes TestWriteFixture write testdata/schema1.db with this build. The
// file in testdata was written by the boltstore of schema 1 (commit d487b29), before the
// store moved to the storage engine; TestMigrate opens a copy of it.
var writeFixture = flag.Bool("write-fixture", false, "write testdata/schema1.db with this build's boltstore")

// fixtureRuns returns the runs and operations of the migration fixture: both kinds,
// every profile, phases with and without history, operations in every phase, with
// PostOperationItems nil, empty and full, every status field, times in UTC, in
// time.Local and in a fixed zone, and names that need care in keys.
func fixtureRuns() ([]operations.Run, map[operations.Owner][]operations.Operation) {
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)
	zone := time.FixedZone("CEST", 2*3600)
	var runs []operations.Run
	ops := map[operations.Owner][]operations.Operation{}
	add := func(o operations.Owner, p phase.Profile, path []phase.Phase, n int) {
		r := operations.Run{Owner: o, Phase: phase.New, Profile: p, Created: t0, OperationTimeout: time.Hour,
			ItemsTotal: 40, ItemsDone: 12, Errors: 2, Warnings: 3, FailedOperations: 1}
		for i, to := range path {
			if err := r.SetPhase(to, fmt.Sprintf("step %d", i), t0.Add(time.Duration(i+1)*time.Minute)); err != nil {
				panic(err)
			}
		}
		if r.Phase == phase.Failed {
			r.FailureReason = "the main run failed: \"quoted\" ünïcode"
		}
		runs = append(runs, r)
		phases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
		for i := 0; i < n; i++ {
			op := operations.Operation{
				Owner:    o,
				Action:   "example.io/mover",
				Resource: operations.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "ns", Name: fmt.Sprintf("item-%d", i)},
				ID:       fmt.Sprintf("op-%03d", i),
				Status: operations.Status{Phase: phases[i%4], NCompleted: int64(i), NTotal: 100, OperationUnits: "Bytes",
					Description: "copying", Created: t0, Started: t0.Add(time.Second).In(zone), Updated: t0.Add(2 * time.Second).Local()},
			}
			if op.Status.Phase == operations.OperationFailed {
				op.Status.Error = "plugin said no"
			}
			if o.Kind == phase.Backup {
				switch i % 3 {
				case 1:
					op.PostOperationItems = []operations.ResourceIdentifier{}
				case 2:
					op.PostOperationItems = []operations.ResourceIdentifier{{Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data"}, {Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "ns", Name: "s"}}
				}
			}
			ops[o] = append(ops[o], op)
		}
	}
	add(operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "uid-1"}, phase.Profile{}, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations}, 9)
	add(operations.Owner{Kind: phase.Backup, Name: "queued/with slash", UID: "uid-2"}, phase.Profile{Queue: true}, []phase.Phase{phase.Queued}, 0)
	add(operations.Owner{Kind: phase.Backup, Name: "done-ünï", UID: ""}, phase.Profile{}, []phase.Phase{phase.Completed}, 4)
	add(operations.Owner{Kind: phase.Restore, Name: "nightly", UID: "uid-3"}, phase.Profile{RestoreFinalizing: true}, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperationsPartiallyFailed}, 6)
	add(operations.Owner{Kind: phase.Restore, Name: "r\x00zero", UID: "uid-4"}, phase.Profile{}, []phase.Phase{phase.InProgress, phase.Failed}, 2)
	return runs, ops
}

func TestWriteFixture(t *testing.T) {
	if !*writeFixture {
		t.Skip("run with -write-fixture to write testdata/schema1.db")
	}
	ctx := context.Background()
	s, err := boltstore.Open(filepath.Join("testdata", "schema1.db"), nil)
	require.NoError(t, err)
	defer s.Close()
	runs, ops := fixtureRuns()
	for _, r := range runs {
		require.NoError(t, s.CreateRun(ctx, r))
		if batch := ops[r.Owner]; len(batch) > 0 {
			// Two batches, the second replacing part of the first, so that sequence
			// numbers and the unfinished and finished buckets both matter.
			require.NoError(t, s.PutOperations(ctx, r.Owner, batch[:len(batch)/2+1]))
			require.NoError(t, s.PutOperations(ctx, r.Owner, batch[len(batch)/2:]))
		}
	}
}

// TestMigrate opens a copy of a file written by the boltstore of schema 1 and one of
// schema 2 (testdata/schema2.db, written by commit ec2c6ba with fixtureRuns, before the
// entries had checksums): Open migrates it, every run and operation reads back as it was
// written, in order, the file passes the check, and the store goes on working; the
// migrated file opens again without a second migration.
func TestMigrate(t *testing.T) {
	for _, name := range []string{"schema1.db", "schema2.db"} {
		t.Run(name, func(t *testing.T) { testMigrate(t, name) })
	}
}

func testMigrate(t *testing.T, fixture string) {
	ctx := context.Background()
	old, err := os.ReadFile(filepath.Join("testdata", fixture))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "store.db")
	require.NoError(t, os.WriteFile(path, old, 0o600))

	runs, ops := fixtureRuns()
	for round := 0; round < 2; round++ {
		s, err := boltstore.Open(path, &boltstore.Options{})
		require.NoError(t, err, "Open, round %d", round)
		require.NoError(t, s.Check(ctx), "the migrated file, round %d", round)
		checkFixture(t, s, runs, ops)
		// The migrated store takes new writes.
		o := runs[0].Owner
		next := ops[o][0]
		next.ID = fmt.Sprintf("after-migration-%d", round)
		require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{next}))
		require.NoError(t, s.Check(ctx))
		require.NoError(t, s.Close())
		ops[o] = append(ops[o], next) // what the next round must find too
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		var names [][]byte
		err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error { names = append(names, bytes.Clone(name)); return nil })
		if d := cmp.Diff([][]byte{[]byte("kv"), []byte("meta")}, names); d != "" {
			t.Errorf("buckets after migration (-want +got):\n%s", d)
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("version")); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 3}) {
			t.Errorf("schema version after migration: %x, want 3", v)
		}
		return err
	}))
}

// checkFixture checks that s holds runs and ops, the content of testdata/schema1.db
// (with what a test added to it), each run's operations in first-put order.
func checkFixture(t *testing.T, s *boltstore.Store, runs []operations.Run, ops map[operations.Owner][]operations.Operation) {
	t.Helper()
	ctx := context.Background()
	got, err := s.ListRuns(ctx, operations.RunFilter{})
	require.NoError(t, err)
	sortRuns := cmpopts.SortSlices(func(a, b operations.Run) bool {
		return a.Owner.Kind < b.Owner.Kind || (a.Owner.Kind == b.Owner.Kind && a.Owner.Name < b.Owner.Name)
	})
	opt := cmp.Options{sortRuns, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}
	if d := cmp.Diff(runs, got, opt); d != "" {
		t.Fatalf("runs after migration (-want +got):\n%s", d)
	}
	for _, r := range runs {
		gotOps, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		if d := cmp.Diff(ops[r.Owner], gotOps, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
			t.Errorf("operations of %s after migration (-want +got):\n%s", r.Owner, d)
		}
		// PostOperationItems keep nil apart from empty.
		require.Len(t, gotOps, len(ops[r.Owner]))
		for i := range gotOps {
			if (ops[r.Owner][i].PostOperationItems == nil) != (gotOps[i].PostOperationItems == nil) {
				t.Errorf("operation %s of %s: PostOperationItems nil-ness changed", gotOps[i].ID, r.Owner)
			}
		}
		waiting, err := s.ListRuns(ctx, operations.RunFilter{Kind: r.Owner.Kind, Phases: []phase.Phase{r.Phase}})
		require.NoError(t, err)
		require.True(t, containsRun(waiting, r.Owner), "ListRuns by phase %s misses %s", r.Phase, r.Owner)
	}
}

// TestReadOnlyOldSchema opens a file of schema 1, and one of schema 2, read-only: it
// reads as a migrated one does, through a copy in the temporary directory that Close
// removes, and the file itself is not changed.
func TestReadOnlyOldSchema(t *testing.T) {
	for _, name := range []string{"schema1.db", "schema2.db"} {
		t.Run(name, func(t *testing.T) { testReadOnlyOldSchema(t, name) })
	}
}

func testReadOnlyOldSchema(t *testing.T, fixture string) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	path := filepath.Join(t.TempDir(), "store.db")
	old, err := os.ReadFile(filepath.Join("testdata", fixture))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, old, 0o600))

	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	runs, ops := fixtureRuns()
	checkFixture(t, s, runs, ops)
	copies, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, copies, 1, "the migrated copy in the temporary directory")
	o := runs[0].Owner
	require.ErrorIs(t, s.PutOperations(context.Background(), o, ops[o][:1]), boltstore.ErrReadOnly)
	require.NoError(t, s.Close())

	copies, err = os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, copies, "Close leaves the migrated copy behind")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(old, got), "a read-only Open changed a file of %s", fixture)
}

func containsRun(runs []operations.Run, o operations.Owner) bool {
	for _, r := range runs {
		if r.Owner.Kind == o.Kind && r.Owner.Name == o.Name {
			return true
		}
	}
	return false
}
