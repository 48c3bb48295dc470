// Package decorate builds decorators of an operations.Store: one function sees every
// call, the optional abilities of the store included.
package decorate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/itemops/itemops/operations"
)

// A Call is one call of a method of an [operations.Store] that [Store] passes to its
// function.
type Call struct {
	// Method is the method's name: one of the eight of operations.Store,
	// CreateRunWithOperations (of an [operations.RunStarter]), ClaimRun (of an
	// [operations.RunClaimer], or of an [operations.ClaimSession]), or ReadPass or
	// CommitPass (of an [operations.PassReader]; a ReadPass's call spans the calls of
	// its function, with every page).
	Method string
	// Owner is the owner the call names (the run's, for CreateRun,
	// CreateRunWithOperations and CommitPass); the zero Owner for ListRuns and
	// ReadPass.
	Owner operations.Owner
	// Write is true for the methods that write records: CreateRun, UpdateRun,
	// DeleteRun, PutOperations, CreateRunWithOperations and CommitPass.
	Write bool
}

// Store returns an operations.Store that passes every call of a method of s through
// around, to add metrics, tracing, logging or injected faults without writing a method
// for each call. around gets the call and a function that makes it on s with the context
// it is given (around may pass another, carrying a span); around returns what that
// function returned, or an error of its own. The results of the call are the method's.
//
// The store returned keeps the optional abilities of s: it is an
// [operations.RunStarter], an [operations.RunClaimer], an [operations.ClaimKeeper], an
// [operations.ClaimTaker] and an [operations.PassReader] exactly when s is, so that
// CreateRunWithOperations stays one atomic write, [operations.StartRun] holds a run's
// claim while its main run runs, and Monitors keep their claims, take over those of a
// dead leader and read their passes in pages. It is never an
// [operations.OperationCounter]: a status filled from it (controllerruntime's
// RunStatus.SetFromStore) reads every operation of the run instead. Their calls pass through around too,
// and so do the ClaimRun calls of the claim sessions that KeepClaims returns;
// KeepClaims itself, and a session's EndPass, EndIncompletePass and End, which cannot
// fail, go straight to s and to its session, and so does TakeOverClaims, which names no
// run. (A
// decorator type that embeds the operations.Store it wraps hides those abilities
// instead, as only the methods of the interface it embeds are promoted.)
//
// When around returns nil without having called the function, the method fails with an
// error wrapping [operations.ErrInvalid], since it has no result to return; when around
// calls it more than once, the method returns the last call's results. A nil around
// passes every call straight to s; a nil s makes every method fail with an error
// wrapping operations.ErrInvalid. The store is safe for concurrent use as far as s and
// around are.
func Store(s operations.Store, around func(ctx context.Context, c Call, call func(ctx context.Context) error) error) operations.Store {
	d := &decorated{s: s, around: around}
	d.starter, _ = s.(operations.RunStarter)
	d.claimer, _ = s.(operations.RunClaimer)
	d.keeper, _ = s.(operations.ClaimKeeper)
	d.taker, _ = s.(operations.ClaimTaker)
	d.passer, _ = s.(operations.PassReader)
	st, cl, ps := starts{d}, claims{d}, passes{d}
	if d.passer == nil {
		switch {
		case d.starter != nil && d.taker != nil:
			return starterTaker{d, st, takes{keeps{cl}}}
		case d.taker != nil:
			return taker{d, takes{keeps{cl}}}
		case d.starter != nil && d.keeper != nil:
			return starterKeeper{d, st, keeps{cl}}
		case d.keeper != nil:
			return keeper{d, keeps{cl}}
		case d.starter != nil && d.claimer != nil:
			return starterClaimer{d, st, cl}
		case d.claimer != nil:
			return claimer{d, cl}
		case d.starter != nil:
			return starter{d, st}
		}
		return d
	}
	switch {
	case d.starter != nil && d.taker != nil:
		return starterTakerPasser{d, st, takes{keeps{cl}}, ps}
	case d.taker != nil:
		return takerPasser{d, takes{keeps{cl}}, ps}
	case d.starter != nil && d.keeper != nil:
		return starterKeeperPasser{d, st, keeps{cl}, ps}
	case d.keeper != nil:
		return keeperPasser{d, keeps{cl}, ps}
	case d.starter != nil && d.claimer != nil:
		return starterClaimerPasser{d, st, cl, ps}
	case d.claimer != nil:
		return claimerPasser{d, cl, ps}
	case d.starter != nil:
		return starterPasser{d, st, ps}
	}
	return passer{d, ps}
}

// decorated is a store made by Store, with the eight methods of operations.Store. Each
// optional ability has one type that adds its methods (starts, claims, keeps, takes,
// passes),
// and the store Store returns embeds the decorated store and those of the abilities s
// has, so that a type assertion on it is truthful: one type for each combination.
type decorated struct {
	s       operations.Store
	starter operations.RunStarter  // s, when it is one
	claimer operations.RunClaimer  // s, when it is one
	keeper  operations.ClaimKeeper // s, when it is one
	taker   operations.ClaimTaker  // s, when it is one
	passer  operations.PassReader  // s, when it is one
	around  func(ctx context.Context, c Call, call func(ctx context.Context) error) error
}

type (
	starts struct{ d *decorated } // CreateRunWithOperations
	claims struct{ d *decorated } // ClaimRun
	keeps  struct{ claims }       // ClaimRun and KeepClaims: a ClaimKeeper is a RunClaimer
	takes  struct{ keeps }        // and TakeOverClaims: a ClaimTaker is a ClaimKeeper
	passes struct{ d *decorated } // ReadPass and CommitPass

	starter struct {
		*decorated
		starts
	}
	claimer struct {
		*decorated
		claims
	}
	starterClaimer struct {
		*decorated
		starts
		claims
	}
	keeper struct {
		*decorated
		keeps
	}
	starterKeeper struct {
		*decorated
		starts
		keeps
	}
	passer struct {
		*decorated
		passes
	}
	starterPasser struct {
		*decorated
		starts
		passes
	}
	claimerPasser struct {
		*decorated
		claims
		passes
	}
	starterClaimerPasser struct {
		*decorated
		starts
		claims
		passes
	}
	keeperPasser struct {
		*decorated
		keeps
		passes
	}
	starterKeeperPasser struct {
		*decorated
		starts
		keeps
		passes
	}
	taker struct {
		*decorated
		takes
	}
	starterTaker struct {
		*decorated
		starts
		takes
	}
	takerPasser struct {
		*decorated
		takes
		passes
	}
	starterTakerPasser struct {
		*decorated
		starts
		takes
		passes
	}
)

var (
	_ operations.Store       = (*decorated)(nil)
	_ operations.RunStarter  = starter{}
	_ operations.RunClaimer  = claimer{}
	_ operations.RunStarter  = starterClaimer{}
	_ operations.RunClaimer  = starterClaimer{}
	_ operations.ClaimKeeper = keeper{}
	_ operations.RunStarter  = starterKeeper{}
	_ operations.ClaimKeeper = starterKeeper{}
	_ operations.PassReader  = passer{}
	_ operations.RunStarter  = starterPasser{}
	_ operations.PassReader  = starterPasser{}
	_ operations.RunClaimer  = claimerPasser{}
	_ operations.PassReader  = claimerPasser{}
	_ operations.RunStarter  = starterClaimerPasser{}
	_ operations.RunClaimer  = starterClaimerPasser{}
	_ operations.PassReader  = starterClaimerPasser{}
	_ operations.ClaimKeeper = keeperPasser{}
	_ operations.PassReader  = keeperPasser{}
	_ operations.RunStarter  = starterKeeperPasser{}
	_ operations.ClaimKeeper = starterKeeperPasser{}
	_ operations.PassReader  = starterKeeperPasser{}
	_ operations.ClaimTaker  = taker{}
	_ operations.RunStarter  = starterTaker{}
	_ operations.ClaimTaker  = starterTaker{}
	_ operations.ClaimTaker  = takerPasser{}
	_ operations.PassReader  = takerPasser{}
	_ operations.RunStarter  = starterTakerPasser{}
	_ operations.ClaimTaker  = starterTakerPasser{}
	_ operations.PassReader  = starterTakerPasser{}
)

// do makes call through around.
func (d *decorated) do(ctx context.Context, c Call, call func(ctx context.Context) error) error {
	if d.s == nil {
		return fmt.Errorf("%s: the decorated store is nil: %w", c.Method, operations.ErrInvalid)
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
		return fmt.Errorf("%s of %s: the decorator returned without calling the store: %w", c.Method, c.Owner, operations.ErrInvalid)
	}
	return err
}

func (d *decorated) CreateRun(ctx context.Context, r operations.Run) error {
	return d.do(ctx, Call{Method: "CreateRun", Owner: r.Owner, Write: true}, func(ctx context.Context) error {
		return d.s.CreateRun(ctx, r)
	})
}

func (d *decorated) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	var r operations.Run
	err := d.do(ctx, Call{Method: "GetRun", Owner: o}, func(ctx context.Context) (err error) {
		r, err = d.s.GetRun(ctx, o)
		return err
	})
	if err != nil {
		return operations.Run{}, err
	}
	return r, nil
}

func (d *decorated) UpdateRun(ctx context.Context, o operations.Owner, update func(*operations.Run) error) (operations.Run, error) {
	var r operations.Run
	err := d.do(ctx, Call{Method: "UpdateRun", Owner: o, Write: true}, func(ctx context.Context) (err error) {
		r, err = d.s.UpdateRun(ctx, o, update)
		return err
	})
	if err != nil {
		return operations.Run{}, err
	}
	return r, nil
}

func (d *decorated) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	var runs []operations.Run
	err := d.do(ctx, Call{Method: "ListRuns"}, func(ctx context.Context) (err error) {
		runs, err = d.s.ListRuns(ctx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

func (d *decorated) DeleteRun(ctx context.Context, o operations.Owner) error {
	return d.do(ctx, Call{Method: "DeleteRun", Owner: o, Write: true}, func(ctx context.Context) error {
		return d.s.DeleteRun(ctx, o)
	})
}

func (d *decorated) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	return d.do(ctx, Call{Method: "PutOperations", Owner: o, Write: true}, func(ctx context.Context) error {
		return d.s.PutOperations(ctx, o, ops)
	})
}

func (d *decorated) GetOperation(ctx context.Context, o operations.Owner, id string) (operations.Operation, error) {
	var op operations.Operation
	err := d.do(ctx, Call{Method: "GetOperation", Owner: o}, func(ctx context.Context) (err error) {
		op, err = d.s.GetOperation(ctx, o, id)
		return err
	})
	if err != nil {
		return operations.Operation{}, err
	}
	return op, nil
}

func (d *decorated) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	var ops []operations.Operation
	err := d.do(ctx, Call{Method: "ListOperations", Owner: o}, func(ctx context.Context) (err error) {
		ops, err = d.s.ListOperations(ctx, o, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

func (st starts) CreateRunWithOperations(ctx context.Context, r operations.Run, ops []operations.Operation) error {
	d := st.d
	return d.do(ctx, Call{Method: "CreateRunWithOperations", Owner: r.Owner, Write: true}, func(ctx context.Context) error {
		return d.starter.CreateRunWithOperations(ctx, r, ops)
	})
}

func (p passes) ReadPass(ctx context.Context, f operations.RunFilter, fn func([]operations.PassRun) error) error {
	d := p.d
	return d.do(ctx, Call{Method: "ReadPass"}, func(ctx context.Context) error {
		return d.passer.ReadPass(ctx, f, fn)
	})
}

func (p passes) CommitPass(ctx context.Context, r operations.PassRun, ops []operations.Operation) error {
	d := p.d
	return d.do(ctx, Call{Method: "CommitPass", Owner: r.Run.Owner, Write: true}, func(ctx context.Context) error {
		return d.passer.CommitPass(ctx, r, ops)
	})
}

func (cl claims) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return cl.d.claimRun(ctx, o, cl.d.claimer)
}

func (k keeps) KeepClaims(ctx context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	return session{ClaimSession: k.d.keeper.KeepClaims(ctx, interval, wake), d: k.d}
}

func (t takes) TakeOverClaims(ctx context.Context) (int, error) {
	return t.d.taker.TakeOverClaims(ctx)
}

// session is a claim session of the store that d decorates, whose claims pass through
// d's around.
type session struct {
	operations.ClaimSession
	d *decorated
}

func (s session) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	return s.d.claimRun(ctx, o, s.ClaimSession)
}

// claimRun makes the claim of c through around.
func (d *decorated) claimRun(ctx context.Context, o operations.Owner, c operations.RunClaimer) (release func(), ok bool, err error) {
	err = d.do(ctx, Call{Method: "ClaimRun", Owner: o}, func(ctx context.Context) (err error) {
		release, ok, err = c.ClaimRun(ctx, o)
		return err
	})
	if err != nil {
		if ok && release != nil {
			release() // around failed a call that got the claim: give it up (or back to the session)
		}
		return nil, false, err
	}
	return release, ok, nil
}
