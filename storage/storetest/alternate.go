package storetest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/itemops/itemops/operations"
)

// Alternate returns an [operations.Store] that sends each call to the next store in
// turn, first, then each of more, then first again, counting the calls of every
// goroutine together. Given several stores of one database (the clients of several
// processes), the suites run on it check the contract across them: a read through one
// sees the writes made through another, and writers racing through several lose
// nothing. The store returned is an [operations.RunStarter] when every store given is
// one, and an [operations.PassReader] when every store given is one: a CommitPass goes
// to the store whose ReadPass read its run, as only that store can commit on its read.
// It is safe for concurrent use as far as the stores are; a nil store fails each call
// sent to it with an error wrapping [operations.ErrInvalid].
func Alternate(first operations.Store, more ...operations.Store) operations.Store {
	a := &alternating{stores: append([]operations.Store{first}, more...)}
	starters, passers := true, true
	for _, s := range a.stores {
		_, st := s.(operations.RunStarter)
		_, ps := s.(operations.PassReader)
		starters, passers = starters && st, passers && ps
	}
	switch {
	case starters && passers:
		return alternatingStarterPasser{a, alternatingStarter{a}, alternatingPasser{a}}
	case starters:
		return alternatingStarter{a}
	case passers:
		return alternatingPasser{a}
	}
	return a
}

// alternating is the store of Alternate, without CreateRunWithOperations.
type alternating struct {
	stores []operations.Store
	calls  atomic.Uint64 // made so far
}

// pick returns the store of the next call.
func (a *alternating) pick() (operations.Store, error) {
	i := (a.calls.Add(1) - 1) % uint64(len(a.stores))
	if a.stores[i] == nil {
		return nil, fmt.Errorf("storetest: store %d of Alternate is nil: %w", i, operations.ErrInvalid)
	}
	return a.stores[i], nil
}

func (a *alternating) CreateRun(ctx context.Context, r operations.Run) error {
	s, err := a.pick()
	if err != nil {
		return err
	}
	return s.CreateRun(ctx, r)
}

func (a *alternating) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	s, err := a.pick()
	if err != nil {
		return operations.Run{}, err
	}
	return s.GetRun(ctx, o)
}

func (a *alternating) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	s, err := a.pick()
	if err != nil {
		return operations.Run{}, err
	}
	return s.UpdateRun(ctx, o, update)
}

func (a *alternating) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	s, err := a.pick()
	if err != nil {
		return nil, err
	}
	return s.ListRuns(ctx, f)
}

func (a *alternating) DeleteRun(ctx context.Context, o operations.Owner) error {
	s, err := a.pick()
	if err != nil {
		return err
	}
	return s.DeleteRun(ctx, o)
}

func (a *alternating) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	s, err := a.pick()
	if err != nil {
		return err
	}
	return s.PutOperations(ctx, o, ops)
}

func (a *alternating) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	s, err := a.pick()
	if err != nil {
		return operations.Operation{}, err
	}
	return s.GetOperation(ctx, o, id)
}

func (a *alternating) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	s, err := a.pick()
	if err != nil {
		return nil, err
	}
	return s.ListOperations(ctx, o, f)
}

// alternatingStarter is the store of Alternate over RunStarters.
type alternatingStarter struct{ *alternating }

func (a alternatingStarter) CreateRunWithOperations(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	s, err := a.pick()
	if err != nil {
		return err
	}
	return s.(operations.RunStarter).CreateRunWithOperations(ctx, r, ops)
}

// alternatingPasser is the store of Alternate over PassReaders.
type alternatingPasser struct{ *alternating }

// alternatingStarterPasser is the store of Alternate over stores that are both. Its
// Store methods are those of the alternating it embeds at the shallowest depth.
type alternatingStarterPasser struct {
	*alternating
	starter alternatingStarter
	passer  alternatingPasser
}

func (a alternatingStarterPasser) CreateRunWithOperations(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	return a.starter.CreateRunWithOperations(ctx, r, ops)
}

func (a alternatingStarterPasser) ReadPass(ctx context.Context, f operations.RunFilter, fn func([]operations.PassRun) error) error {
	return a.passer.ReadPass(ctx, f, fn)
}

func (a alternatingStarterPasser) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	return a.passer.CommitPass(ctx, r, ops)
}

// altSnapshot is the Snapshot of a PassRun that the store of Alternate read: the store
// that read it, and its own Snapshot.
type altSnapshot struct {
	store operations.PassReader
	inner any
}

func (a alternatingPasser) ReadPass(ctx context.Context, f operations.RunFilter, fn func([]operations.PassRun) error) error {
	s, err := a.pick()
	if err != nil {
		return err
	}
	p := s.(operations.PassReader)
	return p.ReadPass(ctx, f, func(page []operations.PassRun) error {
		for i := range page {
			page[i].Snapshot = altSnapshot{store: p, inner: page[i].Snapshot}
		}
		return fn(page)
	})
}

func (a alternatingPasser) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	snap, ok := r.Snapshot.(altSnapshot)
	if !ok {
		return fmt.Errorf("storetest: the run was not read by the ReadPass of this Alternate: %w", operations.ErrInvalid)
	}
	r.Snapshot = snap.inner
	return snap.store.CommitPass(ctx, r, ops)
}
