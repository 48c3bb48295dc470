package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
)

// ErrSpansPartitions is returned by the backend of [NewPartitionedBackend] for a commit
// that touches a key of another partition than its own; the commit writes nothing.
var ErrSpansPartitions = errors.New("kvtest: commit outside its partition")

// ErrRunChange is returned by the backend of [NewPartitionedBackend] for a commit whose
// [kv.RunChange] does not fit the run it changes.
var ErrRunChange = errors.New("kvtest: run change does not fit the run")

// NewPartitionedBackend returns an empty [kv.PartitionedBackend] in memory that is
// strict about partitions, for tests of the engine over it ([kv.OpenPartitioned]). It
// keeps each partition's keys in a map of their own, so a read of a partition sees only
// what commits of that partition wrote, and takes commits within limits. A key belongs
// to the partition that first names it in a commit, and a commit that names, or
// range-deletes, a key of another partition fails with an error wrapping
// [ErrSpansPartitions] and writes nothing. A commit whose RunChange gives a From other
// than the run's phase, or deletes a run that is absent, fails with an error wrapping
// [ErrRunChange] and writes nothing; a commit that deletes the run and leaves keys in
// its partition fails with it too, once it has written. ScanRuns is answered from the
// records and phases that RunChanges gave, not from the keys. The backend is safe for
// concurrent use: a commit excludes every read, and reads run together.
func NewPartitionedBackend(limits kv.Limits) kv.PartitionedBackend {
	return &partitioned{
		limits: limits,
		parts:  map[kv.Partition]map[string]item{},
		owners: map[string]kv.Partition{},
		runs:   map[kv.Partition]storedRun{},
	}
}

type partitioned struct {
	limits kv.Limits

	mu      sync.RWMutex                     // guards the fields below; a commit holds it alone
	version kv.Version                       // of the last commit
	parts   map[kv.Partition]map[string]item // the keys of each partition
	owners  map[string]kv.Partition          // the partition of every key a commit named
	runs    map[kv.Partition]storedRun       // the record and phase of every run, by RunChange
}

// An item is the value of a key and the version of its last write.
type item struct {
	value []byte
	ver   kv.Version
}

// A storedRun is the record and phase of a run as the RunChanges of its commits left it.
type storedRun struct {
	record []byte
	phase  phase.Phase
}

func (b *partitioned) ReadPartition(ctx context.Context, p kv.Partition, fn func(kv.Reader) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(reader{b: b, p: p})
}

// A reader reads the keys of partition p; a Scan of the global partition with no
// bounds goes on to the keys of every other partition, as
// kv.PartitionedBackend.ReadPartition says.
type reader struct {
	b *partitioned
	p kv.Partition
}

func (r reader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	it := r.b.parts[r.p][string(key)]
	return it.value, it.ver, nil
}

func (r reader) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v kv.Version) error) error {
	parts := []kv.Partition{r.p}
	if r.p == (kv.Partition{}) && len(start) == 0 && len(end) == 0 {
		parts = slices.Collect(maps.Keys(r.b.parts))
	}
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		m := r.b.parts[p]
		var keys []string
		for k := range m {
			if k >= string(start) && (len(end) == 0 || k < string(end)) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := fn([]byte(k), m[k].value, m[k].ver); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *partitioned) CommitPartition(ctx context.Context, p kv.Partition, run kv.RunChange, conds []kv.Condition, writes []kv.Write) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.limits.Check(conds, writes); err != nil {
		return err
	}
	if err := b.checkKeys(p, conds, writes); err != nil {
		return err
	}
	m := b.parts[p]
	for _, c := range conds {
		if m[string(c.Key)].ver != c.Version {
			return fmt.Errorf("key %q: %w", c.Key, kv.ErrConditionFailed)
		}
	}
	// The RunChange is checked once the conditions hold, since a commit that fails them
	// may rightly name a phase that is no longer the run's.
	if err := b.checkRunChange(p, run); err != nil {
		return err
	}
	if m == nil {
		m = map[string]item{}
		b.parts[p] = m
	}
	b.version++
	for _, c := range conds {
		b.owners[string(c.Key)] = p
	}
	for _, w := range writes {
		b.owners[string(w.Key)] = p
		switch {
		case w.Delete && len(w.End) > 0:
			for k := range m {
				if k >= string(w.Key) && k < string(w.End) {
					delete(m, k)
				}
			}
		case w.Delete:
			delete(m, string(w.Key))
		default:
			m[string(w.Key)] = item{value: bytes.Clone(w.Value), ver: b.version}
		}
	}
	switch {
	case run.Delete:
		delete(b.runs, p)
		if len(m) > 0 {
			return fmt.Errorf("the commit that deleted the run of %+v left %d keys in its partition: %w", p, len(m), ErrRunChange)
		}
	case run.Record != nil:
		b.runs[p] = storedRun{record: bytes.Clone(run.Record), phase: run.Phase}
	}
	return nil
}

// checkKeys refuses a commit of p that names a key, or range-deletes keys, that a
// commit of another partition named.
func (b *partitioned) checkKeys(p kv.Partition, conds []kv.Condition, writes []kv.Write) error {
	other := func(k []byte) error {
		if q, ok := b.owners[string(k)]; ok && q != p {
			return fmt.Errorf("a commit of %+v names key %q of %+v: %w", p, k, q, ErrSpansPartitions)
		}
		return nil
	}
	for _, c := range conds {
		if err := other(c.Key); err != nil {
			return err
		}
	}
	for _, w := range writes {
		if err := other(w.Key); err != nil {
			return err
		}
		if !w.Delete || len(w.End) == 0 {
			continue
		}
		for k, q := range b.owners {
			if q != p && k >= string(w.Key) && k < string(w.End) {
				return fmt.Errorf("a commit of %+v deletes key %q of %+v: %w", p, k, q, ErrSpansPartitions)
			}
		}
	}
	return nil
}

// checkRunChange refuses a RunChange that does not fit the run of p as it stands.
func (b *partitioned) checkRunChange(p kv.Partition, run kv.RunChange) error {
	stored, ok := b.runs[p]
	switch {
	case run.Record == nil && !run.Delete:
		return nil
	case p == (kv.Partition{}):
		return fmt.Errorf("a commit of the global partition changes a run: %w", ErrRunChange)
	case run.Delete && !ok:
		return fmt.Errorf("a commit deletes the absent run of %+v: %w", p, ErrRunChange)
	case run.Record != nil && run.Phase == "":
		return fmt.Errorf("a commit writes the run of %+v without its phase: %w", p, ErrRunChange)
	case !ok && run.From != "", ok && run.From != stored.phase:
		return fmt.Errorf("a commit changes the run of %+v from phase %q, which is %q: %w", p, run.From, stored.phase, ErrRunChange)
	}
	return nil
}

func (b *partitioned) ScanRuns(ctx context.Context, f operations.RunFilter, fn func(p kv.Partition, indexed phase.Phase, record []byte) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	for p, r := range b.runs {
		if !f.Match(operations.Run{Owner: operations.Owner{Kind: p.Kind}, Phase: r.phase}) {
			continue
		}
		var indexed phase.Phase
		if len(f.Phases) > 0 {
			indexed = r.phase
		}
		if err := fn(p, indexed, r.record); err != nil {
			return err
		}
	}
	return nil
}

func (b *partitioned) Limits() kv.Limits { return b.limits }
