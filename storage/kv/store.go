package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/internal/layout"
	"github.com/itemops/itemops/storage/internal/record"
)

// A Store is the engine: an [operations.Store] over a [Backend] or a
// [PartitionedBackend]. Create one with [Open] or [OpenPartitioned]. It is safe for
// concurrent use, as its backend is, also by Stores in other processes on the same
// backend. Every method of a nil *Store fails with [ErrClosed].
type Store struct {
	b        PartitionedBackend
	limits   Limits
	attempts int // see WithRetries
	turns    turns

	nextBatch func() uint64 // nil: batchNumber draws at random; tests set it
}

// An Option configures a [Store].
type Option func(*Store)

// DefaultRetries is how many times a write that loses races to concurrent writers is
// tried before it fails with operations.ErrConflict. A write, or a read of a run's
// operations, that finds a batch of another write staged applies it and counts that as
// a lost race, so every call ends after that many tries.
const DefaultRetries = 100

// WithRetries sets how many times a write that loses races is tried (see
// [DefaultRetries]); the default is DefaultRetries, and less than 1 means 1.
func WithRetries(n int) Option { return func(s *Store) { s.attempts = max(n, 1) } }

var _ operations.Store = (*Store)(nil)

// Open returns the engine over b. It reads the format key: a backend without keys
// becomes a store (the format key is written), a backend of this format is opened as it
// is, and anything else fails with an error wrapping [ErrFormat], leaving b unchanged.
// A done ctx, or a backend error, fails it with that error; a write of the format key
// that keeps losing races, as [DefaultRetries] says, fails it with operations.ErrConflict.
func Open(ctx context.Context, b Backend, opts ...Option) (*Store, error) {
	return open(ctx, newFlat(b), opts...)
}

// open is Open and OpenPartitioned, on the partitioned view of a backend.
func open(ctx context.Context, b PartitionedBackend, opts ...Option) (*Store, error) {
	s := &Store{b: b, limits: b.Limits(), attempts: DefaultRetries}
	for _, o := range opts {
		o(s)
	}
	err := s.retry(ctx, func() error {
		var format []byte
		var empty bool
		err := b.ReadPartition(ctx, Partition{}, func(r Reader) error {
			v, _, err := r.Get(ctx, []byte(layout.FormatKey))
			if err != nil {
				return err
			}
			format = bytes.Clone(v)
			if v != nil {
				return nil
			}
			empty = true
			return r.Scan(ctx, nil, nil, func(k, _ []byte, _ Version) error {
				empty = false
				return errStop
			})
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		switch {
		case string(format) == layout.FormatValue:
			return nil
		case format != nil:
			return fmt.Errorf("format %q, want %q: %w", format, layout.FormatValue, ErrFormat)
		case !empty:
			return fmt.Errorf("keys without a format key: %w", ErrFormat)
		}
		// Lost when another Open wrote the format key first: the next try reads it.
		return lost(b.CommitPartition(ctx, Partition{}, RunChange{}, []Condition{{Key: []byte(layout.FormatKey)}}, []Write{{Key: []byte(layout.FormatKey), Value: []byte(layout.FormatValue)}}))
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// errStop ends a Scan early.
var errStop = errors.New("stop")

// checkUID refuses an owner whose UID is set and differs from the stored run's.
func checkUID(o operations.Owner, stored string) error {
	if o.UID != "" && stored != "" && o.UID != stored {
		return fmt.Errorf("the stored run has UID %q, not %q: %w", stored, o.UID, operations.ErrUIDMismatch)
	}
	return nil
}

// readRun reads and decodes the run of o in r, checking o's UID. It returns
// operations.ErrNotFound when there is none.
func readRun(ctx context.Context, r Reader, o operations.Owner) (operations.Run, Version, error) {
	v, ver, err := r.Get(ctx, layout.RunKey(o))
	if err != nil {
		return operations.Run{}, 0, err
	}
	if v == nil {
		return operations.Run{}, 0, operations.ErrNotFound
	}
	run, err := record.DecodeRun(o, v)
	if err != nil {
		return operations.Run{}, 0, err
	}
	return run, ver, checkUID(o, run.Owner.UID)
}

// CreateRun stores r. It fails, writing nothing, with the error of
// [operations.Run.Validate], with [operations.ErrUIDMismatch] when a run of another UID
// has r's kind and name, with [operations.ErrExists] when another run does, with an
// error wrapping [operations.ErrCorrupt] when the stored run of that kind and name does
// not decode, and with ctx.Err() or the backend's error.
func (s *Store) CreateRun(ctx context.Context, r operations.Run) error {
	if s == nil {
		return ErrClosed
	}
	return s.create(ctx, r, nil)
}

// CreateRunWithOperations stores r together with ops, the first batch of its
// operations, in one atomic write: a reader sees both or neither. It fails as
// [Store.CreateRun] does and as [Store.PutOperations] does on its batch, writing nothing.
// It is the optional operations.RunStarter ability of a store.
func (s *Store) CreateRunWithOperations(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	if s == nil {
		return ErrClosed
	}
	if err := operations.ValidateBatch(r.Owner, ops); err != nil {
		return fmt.Errorf("create run %s: %w", r.Owner, err)
	}
	return s.create(ctx, r, ops)
}

func (s *Store) create(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	recs, err := encodeBatch(r.Owner, ops)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.Owner, err)
	}
	rk, rec := layout.RunKey(r.Owner), record.AppendRun(nil, &r)
	prefix := layout.OpsPrefix(r.Owner)
	metaKey := layout.OpsKey(prefix, layout.OpsMeta)
	meta := layout.Meta{Next: 1}
	body := planNew(prefix, &meta, ops, recs)
	conds := []Condition{{Key: rk}, {Key: metaKey}}
	change := RunChange{Record: rec, Phase: r.Phase, UID: r.Owner.UID, History: r.History, Added: len(ops), Finished: finished(recs)}
	err = s.commitBatch(ctx, partitionOf(r.Owner), prefix, nil, conds, change, body, meta)
	if errors.Is(err, ErrConditionFailed) {
		// The stored run is read, and decoded, within a Read of the backend, so that a
		// damaged one is reported as such (see Backend.Read).
		_, _, err := s.getRun(ctx, r.Owner)
		if errors.Is(err, operations.ErrUIDMismatch) || errors.Is(err, operations.ErrCorrupt) {
			return fmt.Errorf("create run %s: %w", r.Owner, err)
		}
		return fmt.Errorf("create run %s: %w", r.Owner, operations.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.Owner, err)
	}
	return nil
}

// GetRun returns the run of o. It fails with [operations.ErrNotFound], with
// [operations.ErrUIDMismatch] when o's UID is set and differs from the run's, with an
// error wrapping [operations.ErrCorrupt] when the record does not decode, and with
// ctx.Err() or the backend's error.
func (s *Store) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	if s == nil {
		return operations.Run{}, ErrClosed
	}
	if err := notFoundIfInvalid(o); err != nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, err)
	}
	run, _, err := s.getRun(ctx, o)
	if err != nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, err)
	}
	return run, nil
}

// getRun reads the run of o, as readRun does, in a snapshot of its own.
func (s *Store) getRun(ctx context.Context, o operations.Owner) (run operations.Run, ver Version, err error) {
	err = s.b.ReadPartition(ctx, partitionOf(o), func(r Reader) (err error) {
		run, ver, err = readRun(ctx, r, o)
		return err
	})
	return run, ver, err
}

// UpdateRun applies update to the run of o atomically and returns the run as stored.
// update gets a copy of the stored run, and is called again, with a fresh copy, when a
// write of another Store on the same backend commits first. It is called outside every
// transaction of the backend, but while UpdateRun holds the run's turn (see the package
// documentation), so it must not call the Store: a write of the same run from inside it
// waits for UpdateRun to end, which never comes, until that write's ctx ends.
//
// UpdateRun fails, writing nothing, with an error wrapping [operations.ErrInvalid] when
// update is nil, with [operations.ErrNotFound] or [operations.ErrUIDMismatch] as
// [Store.GetRun] does, with update's own error as it is, with the error of
// [operations.ValidateRunUpdate], with [operations.ErrConflict] when it keeps losing races (see [WithRetries]),
// and with ctx.Err() or the backend's error.
func (s *Store) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	if s == nil {
		return operations.Run{}, ErrClosed
	}
	if update == nil {
		return operations.Run{}, fmt.Errorf("update run %s: nil update function: %w", o, operations.ErrInvalid)
	}
	if err := notFoundIfInvalid(o); err != nil {
		return operations.Run{}, fmt.Errorf("update run %s: %w", o, err)
	}
	var after operations.Run
	fromUpdate := false // err is update's own, returned as it is
	err := s.writeRun(ctx, layout.RunKey(o), func() error {
		before, ver, err := s.getRun(ctx, o)
		if err != nil {
			return err
		}
		work := before.Clone()
		if err := update(&work); err != nil {
			fromUpdate = true
			return err
		}
		after = work.Clone() // update may have kept the pointer it was given
		if err := operations.ValidateRunUpdate(before, after); err != nil {
			return err
		}
		rk, rec := layout.RunKey(o), record.AppendRun(nil, &after)
		change := RunChange{Record: rec, Phase: after.Phase, UID: after.Owner.UID, From: before.Phase, History: after.History}
		return lost(s.b.CommitPartition(ctx, partitionOf(o), change, []Condition{{Key: rk, Version: ver}}, []Write{{Key: rk, Value: rec}}))
	})
	switch {
	case fromUpdate:
		return operations.Run{}, err
	case err != nil:
		return operations.Run{}, fmt.Errorf("update run %s: %w", o, err)
	}
	return after, nil
}

// ListRuns returns the runs f selects, by kind (Backup, Restore, then kinds of one's own
// in the byte order of their names), then name, from one snapshot of the backend (see
// [PartitionedBackend.ScanRuns]); on a [Backend], when f names phases it reads only the
// phase index entries of those phases. It fails with an error wrapping
// [operations.ErrCorrupt] when a record does not decode or is listed under a phase
// other than its own, and with ctx.Err() or the backend's error.
func (s *Store) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	if s == nil {
		return nil, ErrClosed
	}
	out := []operations.Run{}
	err := s.b.ScanRuns(ctx, f, func(p Partition, indexed phase.Phase, v []byte) error {
		run, err := decodeListed(p, indexed, v)
		if err != nil {
			return err
		}
		if f.Match(run) {
			out = append(out, run)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	slices.SortFunc(out, func(a, b operations.Run) int { return layout.CompareOwners(a.Owner, b.Owner) })
	return out, nil
}

// DeleteRun deletes the run of o and all its operations in one atomic write. It fails,
// deleting nothing, with [operations.ErrNotFound] or [operations.ErrUIDMismatch] as
// [Store.GetRun] does, and with ctx.Err() or the backend's error.
func (s *Store) DeleteRun(ctx context.Context, o operations.Owner) error {
	if s == nil {
		return ErrClosed
	}
	if err := notFoundIfInvalid(o); err != nil {
		return fmt.Errorf("delete run %s: %w", o, err)
	}
	rk, prefix := layout.RunKey(o), layout.OpsPrefix(o)
	err := s.writeRun(ctx, rk, func() error {
		run, ver, err := s.getRun(ctx, o)
		if err != nil {
			return err
		}
		return lost(s.b.CommitPartition(ctx, partitionOf(o), RunChange{From: run.Phase, Delete: true}, []Condition{{Key: rk, Version: ver}}, []Write{
			{Key: rk, Delete: true},
			{Key: prefix, End: end(prefix), Delete: true},
		}))
	})
	if err != nil {
		return fmt.Errorf("delete run %s: %w", o, err)
	}
	return nil
}
