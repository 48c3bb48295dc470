package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/internal/testutil/cputime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// seededBench opens a store holding a run of o with n running operations and returns it
// with a copy of those operations for the benchmark to update.
func seededBench(b *testing.B, noSync bool, o operations.Owner, n int) (*Store, []operations.Operation) {
	b.Helper()
	ctx := context.Background()
	s := openBench(b, b.TempDir(), noSync)
	if err := s.CreateRun(ctx, newRun(o, phase.InProgress)); err != nil {
		b.Fatal(err)
	}
	if err := s.PutOperations(ctx, o, benchOps(o, 0, n, operations.OperationInProgress, 0)); err != nil {
		b.Fatal(err)
	}
	return s, benchOps(o, 0, n, operations.OperationInProgress, 0)
}

// benchOps returns n operations of o, op-000000 upward, in phase p, with progress done.
func benchOps(o operations.Owner, from, n int, p operations.OperationPhase, done int64) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = newOp(o, fmt.Sprintf("op-%06d", from+i), p)
		ops[i].Status.NCompleted = done
		ops[i].Status.Updated = t0
	}
	return ops
}

func openBench(b *testing.B, dir string, noSync bool) *Store {
	b.Helper()
	s, err := Open(filepath.Join(dir, "store.db"), &Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkStatusUpdates writes one status update to each of 10,000 stored operations:
// in one PutOperations call, in 10,000 single-operation calls, and, as the floor, in one
// bare bbolt transaction on the same file that puts the same encoded bytes under the
// same keys (no validation, no ID index, nothing encoded during the transaction). Each is
// measured with the default fsync of every commit and with NoSync.
func BenchmarkStatusUpdates(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	o := backup("bench")
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"sync", false}, {"nosync", true}} {
		b.Run(mode.name+"/batch", func(b *testing.B) {
			s, updates := seededBench(b, mode.noSync, o, n)
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				for j := range updates {
					updates[j].Status.NCompleted = int64(i + 1)
				}
				if err := s.PutOperations(ctx, o, updates); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/single", func(b *testing.B) {
			s, updates := seededBench(b, mode.noSync, o, n)
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				for j := range updates {
					updates[j].Status.NCompleted = int64(i + 1)
					if err := s.PutOperations(ctx, o, updates[j:j+1]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(mode.name+"/bare-bbolt", func(b *testing.B) {
			// The same file as the batch case: a store holding the run and its 10,000
			// operations, closed, then opened with bbolt itself.
			db, keys, vals := bareFile(b, o, n, mode.noSync)
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				if err := db.Update(func(tx *bolt.Tx) error { return putBare(tx, keys, vals) }); err != nil {
					b.Fatal(err)
				}
			}
		})
		if !mode.noSync {
			continue // with fsync, single transactions cost what the single calls show
		}
		b.Run(mode.name+"/bare-bbolt-single", func(b *testing.B) {
			// The floor of the single calls: 10,000 bare transactions of one put each.
			db, keys, vals := bareFile(b, o, n, mode.noSync)
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				for j := range keys {
					if err := db.Update(func(tx *bolt.Tx) error { return putBare(tx, keys[j:j+1], vals[j:j+1]) }); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// putBare puts vals under keys in the file's one bucket, as the store keeps its records.
func putBare(tx *bolt.Tx, keys, vals [][]byte) error {
	bk := tx.Bucket(bucketKV)
	for i := range keys {
		if err := bk.Put(keys[i], vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// bareFile makes a store holding run o and n unfinished operations, closes it, and opens
// the file with bbolt itself. It returns keys beside the store's and the records as the
// store writes them: a version, then the record.
func bareFile(b *testing.B, o operations.Owner, n int, noSync bool) (*bolt.DB, [][]byte, [][]byte) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	s := openBench(b, dir, noSync)
	if err := s.CreateRun(ctx, newRun(o, phase.InProgress)); err != nil {
		b.Fatal(err)
	}
	// The store is given the operations as the status update leaves them (NCompleted 1),
	// so that it writes the records the bare transactions put again.
	ops := benchOps(o, 0, n, operations.OperationInProgress, 1)
	if err := s.PutOperations(ctx, o, ops); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "store.db"), 0o600, &bolt.Options{NoSync: noSync, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	// Those records are the values under the keys of the run's unfinished operations,
	// "o" <kind> <len(name)> <name> "u" <seq> in the engine's layout (see storage/kv),
	// each a version and then the record.
	kind := byte('B')
	if o.Kind == phase.Restore {
		kind = 'R'
	}
	prefix := append(binary.AppendUvarint([]byte{'o', kind}, uint64(len(o.Name))), o.Name+"u"...)
	keys := make([][]byte, 0, n)
	vals := make([][]byte, 0, n)
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketKV).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			keys = append(keys, binary.BigEndian.AppendUint64([]byte("bare/"), uint64(len(keys)+1)))
			vals = append(vals, bytes.Clone(v))
		}
		return nil
	})
	if err != nil || len(vals) != n {
		b.Fatalf("read %d of the %d records: %v", len(vals), n, err)
	}
	return db, keys, vals
}

// fixtures caches stores that take long to build, one per name, for all benchmarks of
// the process; TestMain removes fixtureDir.
var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*Store{}
	fixtureDir string
)

// fixture returns the store called name, building it with build the first time.
func fixture(b *testing.B, name string, build func(s *Store) error) *Store {
	b.Helper()
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if s, ok := fixtures[name]; ok {
		return s
	}
	if fixtureDir == "" {
		dir, err := os.MkdirTemp("", "boltstore-bench-")
		if err != nil {
			b.Fatal(err)
		}
		fixtureDir = dir
	}
	s, err := Open(filepath.Join(fixtureDir, name+".db"), &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := build(s); err != nil {
		b.Fatal(err)
	}
	fixtures[name] = s
	return s
}

func closeFixtures() {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	for _, s := range fixtures {
		s.Close()
	}
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
}

// BenchmarkListUnfinished lists the 1,000 unfinished operations of a run, as a Monitor
// pass does: beside 1,000,000 finished operations of the same run (the unfinished ones
// spread among them), and in a run that holds only the 1,000. The third case asks the
// crowded run for the same operations with a filter that also names Failed (of which
// there are none), which the index cannot serve, to show what the index saves.
func BenchmarkListUnfinished(b *testing.B) {
	const (
		unfinished = 1000
		finished   = 1000000
	)
	ctx := context.Background()
	crowded, alone := backup("crowded"), backup("alone")
	s := fixture(b, "unfinished", func(s *Store) error {
		if err := s.CreateRun(ctx, newRun(crowded, phase.WaitingForPluginOperations)); err != nil {
			return err
		}
		if err := s.CreateRun(ctx, newRun(alone, phase.WaitingForPluginOperations)); err != nil {
			return err
		}
		// Chunks of 1,001: one unfinished operation, then 1,000 finished ones.
		for c := 0; c < unfinished; c++ {
			chunk := benchOps(crowded, c*1001, 1001, operations.OperationCompleted, 100)
			chunk[0].Status.Phase = operations.OperationInProgress
			if err := s.PutOperations(ctx, crowded, chunk); err != nil {
				return err
			}
		}
		return s.PutOperations(ctx, alone, benchOps(alone, 0, unfinished, operations.OperationInProgress, 50))
	})
	unfinishedOnly := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	withFailed := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationFailed}}
	for _, tc := range []struct {
		name string
		o    operations.Owner
		f    operations.OperationFilter
	}{
		{"beside-1M-finished", crowded, unfinishedOnly},
		{"alone", alone, unfinishedOnly},
		{"beside-1M-finished-no-index", crowded, withFailed},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				ops, err := s.ListOperations(ctx, tc.o, tc.f)
				if err != nil {
					b.Fatal(err)
				}
				if len(ops) != unfinished {
					b.Fatalf("listed %d operations, want %d", len(ops), unfinished)
				}
			}
		})
	}
}

// BenchmarkListWaitingRuns lists the 100 runs waiting for plugin operations: beside
// 100,000 completed runs, and in a store that holds only the 100. The third case lists
// every run of the crowded store and keeps the waiting ones, as a store without the
// phase index would.
func BenchmarkListWaitingRuns(b *testing.B) {
	const (
		waiting  = 100
		terminal = 100000
	)
	ctx := context.Background()
	build := func(terminal int) func(s *Store) error {
		return func(s *Store) error {
			for i := 0; i < waiting+terminal; i++ {
				p := phase.Completed
				if i%(terminal/waiting+1) == 0 {
					p = phase.WaitingForPluginOperations
				}
				if err := s.CreateRun(ctx, newRun(backup(fmt.Sprintf("backup-%06d", i)), p)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	crowded := fixture(b, "runs-crowded", build(terminal))
	alone := fixture(b, "runs-alone", build(0))
	waitingOnly := operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}
	for _, tc := range []struct {
		name string
		s    *Store
		list func(s *Store) ([]operations.Run, error)
	}{
		{"beside-100k-terminal", crowded, func(s *Store) ([]operations.Run, error) { return s.ListRuns(ctx, waitingOnly) }},
		{"alone", alone, func(s *Store) ([]operations.Run, error) { return s.ListRuns(ctx, waitingOnly) }},
		{"beside-100k-terminal-no-index", crowded, func(s *Store) ([]operations.Run, error) {
			all, err := s.ListRuns(ctx, operations.RunFilter{})
			var out []operations.Run
			for _, r := range all {
				if waitingOnly.Match(r) {
					out = append(out, r)
				}
			}
			return out, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				runs, err := tc.list(tc.s)
				if err != nil {
					b.Fatal(err)
				}
				if len(runs) != waiting {
					b.Fatalf("listed %d runs, want %d", len(runs), waiting)
				}
			}
		})
	}
}

// BenchmarkCheck measures Store.Check, the check Open runs by default, on a file of
// about 32 MiB, per MiB of file; the baseline reads the same file with os.ReadFile.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	s := fixture(b, "check", func(s *Store) error {
		for i := 0; i < 40; i++ {
			o := backup(fmt.Sprintf("check-%02d", i))
			if err := s.CreateRun(ctx, newRun(o, phase.WaitingForPluginOperations)); err != nil {
				return err
			}
			if err := s.PutOperations(ctx, o, benchOps(o, 0, 2500, operations.OperationInProgress, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	info, err := os.Stat(s.path)
	if err != nil {
		b.Fatal(err)
	}
	mib := float64(info.Size()) / (1 << 20)
	b.Run("impl=readfile", func(b *testing.B) {
		cputime.PerOp(b)
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(s.path); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/mib, "ns/MiB")
	})
	b.Run("impl=check", func(b *testing.B) {
		cputime.PerOp(b)
		for i := 0; i < b.N; i++ {
			if err := s.Check(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/mib, "ns/MiB")
		b.ReportMetric(mib, "MiB")
	})
}

// BenchmarkMissedKeys runs the writes and reads whose searches miss their keys, which
// then check the entries of the leaf page where the search ended (see reader.seek), on
// a store that already holds a run of 10,000 operations, without fsync: the creation
// of a new run with 100 new operations (CreateRun then PutOperations), and a
// GetOperation of an operation that is not stored.
func BenchmarkMissedKeys(b *testing.B) {
	ctx := context.Background()
	seeded := operations.Owner{Kind: phase.Backup, Name: "seeded"}
	b.Run("create run of 100 operations", func(b *testing.B) {
		s, _ := seededBench(b, true, seeded, 10_000)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("new-%06d", i)}
			if err := s.CreateRun(ctx, newRun(o, phase.InProgress)); err != nil {
				b.Fatal(err)
			}
			if err := s.PutOperations(ctx, o, benchOps(o, 0, 100, operations.OperationInProgress, 0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get absent operation", func(b *testing.B) {
		s, _ := seededBench(b, true, seeded, 10_000)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := s.GetOperation(ctx, seeded, "op-005000x"); !errors.Is(err, operations.ErrNotFound) {
				b.Fatalf("GetOperation of an absent operation: %v, want ErrNotFound", err)
			}
		}
	})
}
