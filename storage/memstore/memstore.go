// Package memstore is an [operations.Store] that keeps its records in memory, for tests
// and for single-process programs whose records need not outlive the process.
//
// # Limits
//
// Nothing is durable: the records die with the process (or with the [Store] value), and
// two processes never see each other's records. Memory grows with every run and
// operation stored until [Store.DeleteRun] removes them; there is no eviction. Use
// storage/boltstore when records must survive a restart.
//
// # Behaviour
//
// The Store keeps every rule of the [operations.Store] contract and passes
// storage/storetest. Values are copied on the way in and on the way out, so a caller
// never aliases stored data: changing a Run's History or an Operation's
// PostOperationItems after a call changes nothing stored. Runs are listed by kind, then
// name (byte order); operations in the order their IDs were first put.
//
// Runs are indexed by kind and phase, so [Store.ListRuns] with phases costs in proportion
// to the runs it returns (plus sorting them). Each run keeps the positions of its
// unfinished operations (New, InProgress) in first-put order, so [Store.ListOperations]
// filtered to unfinished phases costs in proportion to those, however many finished
// operations the run holds. Other filters scan the run's operations. GetRun and
// GetOperation are map lookups; PutOperations costs in proportion to its batch.
//
// A context that is done when a method starts, or when a write is about to be applied,
// makes the method return ctx.Err() and write nothing.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A Store is an [operations.Store] in memory. Create one with [New]; the zero Store is
// also empty and ready to use. A Store must not be copied after first use.
//
// A Store is safe for concurrent use. One read-write mutex guards all records: reads
// share it, and a write holds it alone while it checks the change against the records
// and applies it, never while it runs the caller's code. [Store.UpdateRun] serializes the
// updates of each run with a per-run token, held while the update function runs, so
// updates of different runs proceed in parallel and no update is lost. An update
// function may read the Store, but must not call UpdateRun for the run it is updating:
// that call would wait for the token until its context is done.
type Store struct {
	// mu guards runs, byPhase, and every entry's run, ops, index, unfinished and
	// nUnfinished fields.
	mu   sync.RWMutex
	runs map[key]*entry
	// byPhase indexes runs by kind and phase; an entry is in exactly one of its sets.
	byPhase map[phaseKey]map[string]*entry
}

var _ operations.Store = (*Store)(nil)

// New returns an empty Store, ready to use. It allocates the maps new(Store) would
// allocate on its first write.
func New() *Store {
	return &Store{runs: make(map[key]*entry), byPhase: make(map[phaseKey]map[string]*entry)}
}

// key identifies a run: kind and name (the UID is not part of the identity).
type key struct {
	kind phase.Kind
	name string
}

func keyOf(o operations.Owner) key { return key{o.Kind, o.Name} }

type phaseKey struct {
	kind  phase.Kind
	phase phase.Phase
}

// An entry is one run and its operations.
type entry struct {
	// updating holds a token while an UpdateRun of this run is in progress. It is a
	// channel rather than a mutex so that a waiting UpdateRun can give up when its
	// context is done.
	updating chan struct{}

	run operations.Run
	// ops holds the operations in the order their IDs were first put; index maps an ID
	// to its position. Operations are never removed one by one, so positions are stable.
	ops   []operations.Operation
	index map[string]int
	// unfinished holds, in ascending order, the positions of every unfinished operation
	// and of some that have finished since: those are skipped when listing and dropped
	// in bulk by compact. (The contract never lets a finished operation become
	// unfinished again; should it, markUnfinished puts it back in order.) nUnfinished
	// counts the unfinished ones.
	unfinished  []int
	nUnfinished int
}

func newEntry(r operations.Run) *entry {
	return &entry{updating: make(chan struct{}, 1), run: r, index: make(map[string]int)}
}

// CreateRun stores a copy of r. It fails with an error wrapping [operations.ErrExists]
// when r's owner (kind and name) has a run, and with the error of [operations.Run.Validate]
// when r is invalid. A done ctx returns ctx.Err(). Nothing is written on failure.
func (s *Store) CreateRun(ctx context.Context, r operations.Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	e := newEntry(r.Clone())

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	k := keyOf(r.Owner)
	if _, ok := s.runs[k]; ok {
		return fmt.Errorf("create run %s: %w", r.Owner, operations.ErrExists)
	}
	if s.runs == nil {
		s.runs = make(map[key]*entry)
	}
	s.runs[k] = e
	s.index(e)
	return nil
}

// GetRun returns a copy of the run of o (kind and name), or an error wrapping
// [operations.ErrNotFound]. A done ctx returns ctx.Err().
func (s *Store) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	if err := ctx.Err(); err != nil {
		return operations.Run{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.runs[keyOf(o)]
	if e == nil {
		return operations.Run{}, fmt.Errorf("get run %s: %w", o, operations.ErrNotFound)
	}
	return e.run.Clone(), nil
}

// UpdateRun calls update with a copy of the run of o and stores the result when
// [operations.ValidateRunUpdate] accepts it, returning a copy of what it stored. update is
// called at most once per UpdateRun, after every earlier update of the run has been
// stored or abandoned, and without the Store's lock held, so it may read the Store (but
// must not update the same run).
//
// UpdateRun fails with an error wrapping [operations.ErrNotFound] when o has no run, or
// when the run is deleted while update runs; with update's own error, unwrapped; or with
// the validator's error. A nil update is refused with [operations.ErrInvalid]. A ctx done
// before the change is applied, also while waiting for another update of the run,
// returns ctx.Err(). Nothing is written on failure.
func (s *Store) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	if err := ctx.Err(); err != nil {
		return operations.Run{}, err
	}
	if update == nil {
		return operations.Run{}, fmt.Errorf("update run %s: nil update function: %w", o, operations.ErrInvalid)
	}
	e, before, err := s.acquire(ctx, o)
	if err != nil {
		return operations.Run{}, err
	}
	defer func() { <-e.updating }()

	work := before.Clone()
	if err := update(&work); err != nil {
		return operations.Run{}, err
	}
	// update may have kept the pointer it was given; store a copy of its result.
	after := work.Clone()
	if err := operations.ValidateRunUpdate(before, after); err != nil {
		return operations.Run{}, fmt.Errorf("update run: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return operations.Run{}, err
	}
	if s.runs[keyOf(o)] != e {
		return operations.Run{}, fmt.Errorf("update run %s: deleted during the update: %w", o, operations.ErrNotFound)
	}
	if after.Phase != e.run.Phase {
		s.unindex(e)
		e.run = after
		s.index(e)
	} else {
		e.run = after
	}
	return after.Clone(), nil
}

// acquire takes the update token of the run of o and returns its entry with a copy of the
// run. Holding the token, the caller is the only writer of e.run; only DeleteRun can
// intervene, which the caller checks before it writes. The caller releases the token.
func (s *Store) acquire(ctx context.Context, o operations.Owner) (*entry, operations.Run, error) {
	k := keyOf(o)
	for {
		s.mu.RLock()
		e := s.runs[k]
		s.mu.RUnlock()
		if e == nil {
			return nil, operations.Run{}, fmt.Errorf("update run %s: %w", o, operations.ErrNotFound)
		}
		select {
		case e.updating <- struct{}{}:
		case <-ctx.Done():
			return nil, operations.Run{}, ctx.Err()
		}
		// select picks at random among ready cases, so the token may have been taken
		// although ctx was already done.
		if err := ctx.Err(); err != nil {
			<-e.updating
			return nil, operations.Run{}, err
		}
		s.mu.RLock()
		live := s.runs[k] == e
		run := e.run.Clone()
		s.mu.RUnlock()
		if live {
			return e, run, nil
		}
		// The run was deleted, and perhaps created again, while this call waited: start
		// over with whatever is stored now.
		<-e.updating
	}
}

// ListRuns returns copies of the runs f selects, by kind (Backup first), then name. When
// f names phases, the cost is in proportion to the runs returned; otherwise every run is
// visited. A done ctx returns ctx.Err().
func (s *Store) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Sort pointers, which swap cheaply, then copy the runs in order.
	var found []*entry
	if len(f.Phases) == 0 {
		found = make([]*entry, 0, len(s.runs))
		for _, e := range s.runs {
			if f.Match(e.run) {
				found = append(found, e)
			}
		}
	} else {
		kinds := []phase.Kind{phase.Backup, phase.Restore}
		if f.Kind != "" {
			kinds = []phase.Kind{f.Kind}
		}
		var sets []map[string]*entry
		n := 0
		for _, kind := range kinds {
			for i, p := range f.Phases {
				if slices.Contains(f.Phases[:i], p) {
					continue // listed twice
				}
				if set := s.byPhase[phaseKey{kind, p}]; len(set) > 0 {
					sets = append(sets, set)
					n += len(set)
				}
			}
		}
		found = make([]*entry, 0, n)
		for _, set := range sets {
			for _, e := range set {
				found = append(found, e)
			}
		}
	}
	slices.SortFunc(found, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.run.Owner.Kind, b.run.Owner.Kind), cmp.Compare(a.run.Owner.Name, b.run.Owner.Name))
	})
	out := make([]operations.Run, len(found))
	for i, e := range found {
		out[i] = e.run
	}
	detachHistories(out)
	return out, nil
}

// DeleteRun deletes the run of o and all its operations, or fails with an error wrapping
// [operations.ErrNotFound]. An UpdateRun of the run that is in progress then fails with
// ErrNotFound. A done ctx returns ctx.Err() and deletes nothing.
func (s *Store) DeleteRun(ctx context.Context, o operations.Owner) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	k := keyOf(o)
	e := s.runs[k]
	if e == nil {
		return fmt.Errorf("delete run %s: %w", o, operations.ErrNotFound)
	}
	s.unindex(e)
	delete(s.runs, k)
	return nil
}

// PutOperations stores copies of ops, all of o, as one atomic batch: it inserts new IDs at
// the end of the run's order and replaces existing ones in place. The batch is checked
// with [operations.ValidateBatch] (an error wrapping [operations.ErrInvalid]) and each
// replacement with [operations.ValidateOperationUpdate] (wrapping
// [operations.ErrConflict]) before anything is written; o without a run gives an error
// wrapping [operations.ErrNotFound]. On any failure, and when ctx is done before the
// batch is applied (ctx.Err()), nothing of the batch is written.
func (s *Store) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := operations.ValidateBatch(o, ops); err != nil {
		return fmt.Errorf("put operations: %w", err)
	}
	batch := make([]operations.Operation, len(ops))
	for i := range ops {
		batch[i] = ops[i].Clone()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	e := s.runs[keyOf(o)]
	if e == nil {
		return fmt.Errorf("put operations of %s: %w", o, operations.ErrNotFound)
	}
	for i := range batch {
		if j, ok := e.index[batch[i].ID]; ok {
			if err := operations.ValidateOperationUpdate(e.ops[j], batch[i]); err != nil {
				return fmt.Errorf("put operations: batch item %d: %w", i, err)
			}
		}
	}
	for i := range batch {
		e.put(batch[i])
	}
	e.compact()
	return nil
}

// GetOperation returns a copy of the operation id of o, or an error wrapping
// [operations.ErrNotFound] when o has no run or the run has no such operation. A done
// ctx returns ctx.Err().
func (s *Store) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	if err := ctx.Err(); err != nil {
		return operations.Operation{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.runs[keyOf(o)]
	if e == nil {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	i, ok := e.index[id]
	if !ok {
		return operations.Operation{}, fmt.Errorf("get operation %q of %s: %w", id, o, operations.ErrNotFound)
	}
	return e.ops[i].Clone(), nil
}

// ListOperations returns copies of the operations of o that f selects, in the order their
// IDs were first put, or an error wrapping [operations.ErrNotFound] when o has no run.
// When f names only unfinished phases (New, InProgress), the cost is in proportion to
// the run's unfinished operations; otherwise every operation of the run is visited. A
// done ctx returns ctx.Err().
func (s *Store) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.runs[keyOf(o)]
	if e == nil {
		return nil, fmt.Errorf("list operations of %s: %w", o, operations.ErrNotFound)
	}
	if len(f.Phases) > 0 && !slices.ContainsFunc(f.Phases, finishedOrUnknown) {
		out := make([]operations.Operation, 0, e.nUnfinished)
		for _, i := range e.unfinished {
			if f.Match(e.ops[i]) {
				out = append(out, e.ops[i])
			}
		}
		detachItems(out)
		return out, nil
	}
	var out []operations.Operation
	if len(f.Phases) == 0 {
		out = make([]operations.Operation, 0, len(e.ops))
	}
	for i := range e.ops {
		if f.Match(e.ops[i]) {
			out = append(out, e.ops[i])
		}
	}
	detachItems(out)
	return out, nil
}

// detachItems gives every operation of ops, shallow copies of stored ones, its own copy
// of PostOperationItems, all carved from one allocation. Each copy's capacity is its
// length, so appending to one never writes into another.
func detachItems(ops []operations.Operation) {
	n := 0
	for i := range ops {
		n += len(ops[i].PostOperationItems)
	}
	items := make([]operations.ResourceIdentifier, n)
	for i := range ops {
		p := ops[i].PostOperationItems
		if p == nil {
			continue
		}
		// An empty, non-nil slice stays so, without room to write into the stored array.
		k := copy(items, p)
		ops[i].PostOperationItems = items[:k:k]
		items = items[k:]
		if k == 0 {
			ops[i].PostOperationItems = p[:0:0]
		}
	}
}

// detachHistories does for the History of runs what detachItems does for operations.
func detachHistories(runs []operations.Run) {
	n := 0
	for i := range runs {
		n += len(runs[i].History)
	}
	hist := make([]operations.Transition, n)
	for i := range runs {
		h := runs[i].History
		if h == nil {
			continue
		}
		k := copy(hist, h)
		runs[i].History = hist[:k:k]
		hist = hist[k:]
		if k == 0 {
			runs[i].History = h[:0:0]
		}
	}
}

// finishedOrUnknown reports whether p is not an unfinished operation phase.
func finishedOrUnknown(p operations.OperationPhase) bool {
	return p != operations.OperationNew && p != operations.OperationInProgress
}

// index adds e to the phase index; s.mu must be held for writing.
func (s *Store) index(e *entry) {
	if s.byPhase == nil {
		s.byPhase = make(map[phaseKey]map[string]*entry)
	}
	pk := phaseKey{e.run.Owner.Kind, e.run.Phase}
	set := s.byPhase[pk]
	if set == nil {
		set = make(map[string]*entry)
		s.byPhase[pk] = set
	}
	set[e.run.Owner.Name] = e
}

// unindex removes e from the phase index; s.mu must be held for writing.
func (s *Store) unindex(e *entry) {
	pk := phaseKey{e.run.Owner.Kind, e.run.Phase}
	set := s.byPhase[pk]
	delete(set, e.run.Owner.Name)
	if len(set) == 0 {
		delete(s.byPhase, pk) // so that phases no run is in cost nothing to list
	}
}

// put inserts or replaces op, which has been validated, and keeps the unfinished index.
func (e *entry) put(op operations.Operation) {
	unfinished := !op.Status.Phase.Finished()
	i, ok := e.index[op.ID]
	if !ok {
		i = len(e.ops)
		e.ops = append(e.ops, op)
		e.index[op.ID] = i
		if unfinished {
			e.markUnfinished(i)
		}
		return
	}
	was := !e.ops[i].Status.Phase.Finished()
	e.ops[i] = op
	switch {
	case was && !unfinished:
		e.nUnfinished-- // its position stays in e.unfinished until compact
	case !was && unfinished:
		// ValidateOperationUpdate refuses this today; keep the index right regardless.
		e.markUnfinished(i)
	}
}

// markUnfinished records that the operation at position i is unfinished.
func (e *entry) markUnfinished(i int) {
	e.nUnfinished++
	if n := len(e.unfinished); n == 0 || e.unfinished[n-1] < i {
		e.unfinished = append(e.unfinished, i) // the common case: a new operation
		return
	}
	if j, found := slices.BinarySearch(e.unfinished, i); !found {
		e.unfinished = slices.Insert(e.unfinished, j, i)
	}
}

// compact drops the positions of finished operations from e.unfinished once they make up
// more than half of it, so listing the unfinished operations visits at most about twice
// as many positions as it returns, at an amortised constant cost per operation finished.
func (e *entry) compact() {
	const slack = 32
	if len(e.unfinished) <= 2*e.nUnfinished+slack {
		return
	}
	e.unfinished = slices.DeleteFunc(e.unfinished, func(i int) bool { return e.ops[i].Status.Phase.Finished() })
	if cap(e.unfinished) > 4*len(e.unfinished)+slack {
		e.unfinished = slices.Clip(slices.Clone(e.unfinished))
	}
}
