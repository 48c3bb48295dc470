package operations

import (
	"context"
	"fmt"
	"sync/atomic"
)

// A Call is one call of a method of a [Store] that [Decorate] passes to its function.
type Call struct {
	// Method is the method's name: one of the eight of Store, CreateRunWithOperations
	// (of a [RunStarter]) or ClaimRun (of a [RunClaimer]).
	Method string
	// Owner is the owner the call names (the run's, for CreateRun and
	// CreateRunWithOperations); the zero Owner for ListRuns.
	Owner Owner
	// Write is true for the methods that write records: CreateRun, UpdateRun,
	// DeleteRun, PutOperations and CreateRunWithOperations.
	Write bool
}

// Decorate returns a Store that passes every call of a method of s through around, to
// add metrics, tracing, logging or injected faults without writing a method for each
// call. around gets the call and a function that makes it on s with the context it is
// given (around may pass another, carrying a span); around returns what that function
// returned, or an error of its own. The results of the call are the method's.
//
// The Store returned keeps the optional abilities of s: it is a [RunStarter] exactly
// when s is, and a [RunClaimer] exactly when s is, and their calls pass through around
// too, so that [StartRun] stays atomic and Monitors keep their claims. (A decorator
// type that embeds the Store it wraps hides them instead, as only the methods of the
// interface it embeds are promoted.)
//
// When around returns nil without having called the function, the method fails with an
// error wrapping [ErrInvalid], since it has no result to return; when around calls it
// more than once, the method returns the last call's results. A nil around passes every
// call straight to s; a nil s makes every method fail with an error wrapping
// ErrInvalid. The Store is safe for concurrent use as far as s and around are.
func Decorate(s Store, around func(ctx context.Context, c Call, call func(ctx context.Context) error) error) Store {
	d := &decorated{s: s, around: around}
	starter, isStarter := s.(RunStarter)
	claimer, isClaimer := s.(RunClaimer)
	d.starter, d.claimer = starter, claimer
	switch {
	case isStarter && isClaimer:
		return decoratedStarterClaimer{d}
	case isStarter:
		return decoratedStarter{d}
	case isClaimer:
		return decoratedClaimer{d}
	}
	return d
}

// decorated is a Store made by Decorate; the types below add the optional abilities of
// the store it decorates.
type decorated struct {
	s       Store
	starter RunStarter // s, when it is one
	claimer RunClaimer // s, when it is one
	around  func(ctx context.Context, c Call, call func(ctx context.Context) error) error
}

type (
	decoratedStarter        struct{ *decorated }
	decoratedClaimer        struct{ *decorated }
	decoratedStarterClaimer struct{ *decorated }
)

var (
	_ Store      = (*decorated)(nil)
	_ RunStarter = decoratedStarter{}
	_ RunClaimer = decoratedClaimer{}
	_ RunStarter = decoratedStarterClaimer{}
	_ RunClaimer = decoratedStarterClaimer{}
)

// do makes call through around.
func (d *decorated) do(ctx context.Context, c Call, call func(ctx context.Context) error) error {
	if d.s == nil {
		return fmt.Errorf("%s: the decorated store is nil: %w", c.Method, ErrInvalid)
	}
	if d.around == nil {
		return call(ctx)
	}
	var called atomic.Bool
	err := d.around(ctx, c, func(ctx context.Context) error {
		called.Store(true)
		return call(ctx)
	})
	if err == nil && !called.Load() {
		return fmt.Errorf("%s of %s: the decorator returned without calling the store: %w", c.Method, c.Owner, ErrInvalid)
	}
	return err
}

func (d *decorated) CreateRun(ctx context.Context, r Run) error {
	return d.do(ctx, Call{Method: "CreateRun", Owner: r.Owner, Write: true}, func(ctx context.Context) error {
		return d.s.CreateRun(ctx, r)
	})
}

func (d *decorated) GetRun(ctx context.Context, o Owner) (Run, error) {
	var r Run
	err := d.do(ctx, Call{Method: "GetRun", Owner: o}, func(ctx context.Context) (err error) {
		r, err = d.s.GetRun(ctx, o)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return r, nil
}

func (d *decorated) UpdateRun(ctx context.Context, o Owner, update func(*Run) error) (Run, error) {
	var r Run
	err := d.do(ctx, Call{Method: "UpdateRun", Owner: o, Write: true}, func(ctx context.Context) (err error) {
		r, err = d.s.UpdateRun(ctx, o, update)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return r, nil
}

func (d *decorated) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	var runs []Run
	err := d.do(ctx, Call{Method: "ListRuns"}, func(ctx context.Context) (err error) {
		runs, err = d.s.ListRuns(ctx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

func (d *decorated) DeleteRun(ctx context.Context, o Owner) error {
	return d.do(ctx, Call{Method: "DeleteRun", Owner: o, Write: true}, func(ctx context.Context) error {
		return d.s.DeleteRun(ctx, o)
	})
}

func (d *decorated) PutOperations(ctx context.Context, o Owner, ops []Operation) error {
	return d.do(ctx, Call{Method: "PutOperations", Owner: o, Write: true}, func(ctx context.Context) error {
		return d.s.PutOperations(ctx, o, ops)
	})
}

func (d *decorated) GetOperation(ctx context.Context, o Owner, id string) (Operation, error) {
	var op Operation
	err := d.do(ctx, Call{Method: "GetOperation", Owner: o}, func(ctx context.Context) (err error) {
		op, err = d.s.GetOperation(ctx, o, id)
		return err
	})
	if err != nil {
		return Operation{}, err
	}
	return op, nil
}

func (d *decorated) ListOperations(ctx context.Context, o Owner, f OperationFilter) ([]Operation, error) {
	var ops []Operation
	err := d.do(ctx, Call{Method: "ListOperations", Owner: o}, func(ctx context.Context) (err error) {
		ops, err = d.s.ListOperations(ctx, o, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

func (d *decorated) createRunWithOperations(ctx context.Context, r Run, ops []Operation) error {
	return d.do(ctx, Call{Method: "CreateRunWithOperations", Owner: r.Owner, Write: true}, func(ctx context.Context) error {
		return d.starter.CreateRunWithOperations(ctx, r, ops)
	})
}

func (d *decorated) claimRun(ctx context.Context, o Owner) (release func(), ok bool, err error) {
	err = d.do(ctx, Call{Method: "ClaimRun", Owner: o}, func(ctx context.Context) (err error) {
		release, ok, err = d.claimer.ClaimRun(ctx, o)
		return err
	})
	if err != nil {
		if ok && release != nil {
			release() // around failed a call that got the claim: give it up
		}
		return nil, false, err
	}
	return release, ok, nil
}

func (d decoratedStarter) CreateRunWithOperations(ctx context.Context, r Run, ops []Operation) error {
	return d.createRunWithOperations(ctx, r, ops)
}

func (d decoratedClaimer) ClaimRun(ctx context.Context, o Owner) (func(), bool, error) {
	return d.claimRun(ctx, o)
}

func (d decoratedStarterClaimer) CreateRunWithOperations(ctx context.Context, r Run, ops []Operation) error {
	return d.createRunWithOperations(ctx, r, ops)
}

func (d decoratedStarterClaimer) ClaimRun(ctx context.Context, o Owner) (func(), bool, error) {
	return d.claimRun(ctx, o)
}
