package decorate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// claimer is a memstore that is also a RunClaimer whose claims are always granted.
type claimer struct {
	*memstore.Store
	released int
}

func (c *claimer) ClaimRun(context.Context, operations.Owner) (func(), bool, error) {
	return func() { c.released++ }, true, nil
}

// keeper is a claimer that is also a ClaimKeeper: its sessions grant every claim and
// record what they are told.
type keeper struct {
	*claimer
	mu     sync.Mutex // guards the fields below
	events []string   // what the sessions were told, in order
}

func (k *keeper) KeepClaims(_ context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	k.record(fmt.Sprintf("KeepClaims(%s, wake %v)", interval, wake != nil))
	return keptSession{k}
}

func (k *keeper) record(event string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, event)
}

// taker is a keeper that is also a ClaimTaker, which records its takeovers.
type taker struct{ *keeper }

func (k taker) TakeOverClaims(context.Context) (int, error) {
	k.record("TakeOverClaims")
	return 1, nil
}

type keptSession struct{ k *keeper }

func (s keptSession) ClaimRun(_ context.Context, o operations.Owner) (func(), bool, error) {
	s.k.record("ClaimRun(" + o.String() + ")")
	return func() { s.k.record("release(" + o.String() + ")") }, true, nil
}

func (s keptSession) EndPass(runs int) error {
	s.k.record(fmt.Sprintf("EndPass(%d)", runs))
	return nil
}
func (s keptSession) EndIncompletePass() { s.k.record("EndIncompletePass") }
func (s keptSession) End()               { s.k.record("End") }

// plain is a Store with no optional ability.
type plain struct{ operations.Store }

// The store decorate.Store returns has each optional ability exactly when the store it
// decorates has it, in every combination a store can have them (a ClaimTaker is a
// ClaimKeeper, which is a RunClaimer).
func TestDecorateKeepsOptionalAbilities(t *testing.T) {
	type abilities struct{ Starter, Claimer, Keeper, Taker, Passer bool }
	// Each store is built of the interfaces of its abilities alone, so that it has no
	// other: a memstore has RunStarter and PassReader.
	type (
		starterOnly = operations.RunStarter
		passerOnly  = operations.PassReader
	)
	mem := memstore.New()
	build := func(a abilities) operations.Store {
		var c operations.RunClaimer
		var k operations.ClaimKeeper
		var tk operations.ClaimTaker
		if a.Taker {
			tk = taker{&keeper{claimer: &claimer{}}}
		} else if a.Keeper {
			k = &keeper{claimer: &claimer{}}
			c = k
		} else if a.Claimer {
			c = &claimer{}
		}
		s := operations.Store(plain{mem})
		switch {
		case a.Starter && a.Passer && tk != nil:
			return struct {
				operations.Store
				starterOnly
				operations.ClaimTaker
				passerOnly
			}{s, mem, tk, mem}
		case a.Passer && tk != nil:
			return struct {
				operations.Store
				operations.ClaimTaker
				passerOnly
			}{s, tk, mem}
		case a.Starter && tk != nil:
			return struct {
				operations.Store
				starterOnly
				operations.ClaimTaker
			}{s, mem, tk}
		case tk != nil:
			return struct {
				operations.Store
				operations.ClaimTaker
			}{s, tk}
		case a.Starter && a.Passer && k != nil:
			return struct {
				operations.Store
				starterOnly
				operations.ClaimKeeper
				passerOnly
			}{s, mem, k, mem}
		case a.Starter && a.Passer && c != nil:
			return struct {
				operations.Store
				starterOnly
				operations.RunClaimer
				passerOnly
			}{s, mem, c, mem}
		case a.Starter && a.Passer:
			return struct {
				operations.Store
				starterOnly
				passerOnly
			}{s, mem, mem}
		case a.Passer && k != nil:
			return struct {
				operations.Store
				operations.ClaimKeeper
				passerOnly
			}{s, k, mem}
		case a.Passer && c != nil:
			return struct {
				operations.Store
				operations.RunClaimer
				passerOnly
			}{s, c, mem}
		case a.Passer:
			return struct {
				operations.Store
				passerOnly
			}{s, mem}
		case a.Starter && k != nil:
			return struct {
				operations.Store
				starterOnly
				operations.ClaimKeeper
			}{s, mem, k}
		case a.Starter && c != nil:
			return struct {
				operations.Store
				starterOnly
				operations.RunClaimer
			}{s, mem, c}
		case a.Starter:
			return struct {
				operations.Store
				starterOnly
			}{s, mem}
		case k != nil:
			return struct {
				operations.Store
				operations.ClaimKeeper
			}{s, k}
		case c != nil:
			return struct {
				operations.Store
				operations.RunClaimer
			}{s, c}
		}
		return s
	}
	for _, starter := range []bool{false, true} {
		for claims := range 4 { // none, RunClaimer, ClaimKeeper, ClaimTaker
			for _, passer := range []bool{false, true} {
				want := abilities{Starter: starter, Claimer: claims > 0, Keeper: claims >= 2, Taker: claims == 3, Passer: passer}
				s := build(want)
				d := decorate.Store(s, func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
					return call(ctx)
				})
				var got abilities
				_, got.Starter = d.(operations.RunStarter)
				_, got.Claimer = d.(operations.RunClaimer)
				_, got.Keeper = d.(operations.ClaimKeeper)
				_, got.Taker = d.(operations.ClaimTaker)
				_, got.Passer = d.(operations.PassReader)
				var have abilities // what s has, to check build
				_, have.Starter = s.(operations.RunStarter)
				_, have.Claimer = s.(operations.RunClaimer)
				_, have.Keeper = s.(operations.ClaimKeeper)
				_, have.Taker = s.(operations.ClaimTaker)
				_, have.Passer = s.(operations.PassReader)
				if have != want {
					t.Fatalf("the test built a store with %+v, want %+v", have, want)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("the abilities of decorate.Store of a store with %+v (-want +got):\n%s", want, diff)
				}
			}
		}
	}
}

// TakeOverClaims of a decorated ClaimTaker reaches the store, and returns what it
// returned.
func TestDecorateTakeOverClaims(t *testing.T) {
	inner := taker{&keeper{claimer: &claimer{Store: memstore.New()}}}
	s := decorate.Store(inner, func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
		return call(ctx)
	})
	ended, err := s.(operations.ClaimTaker).TakeOverClaims(context.Background())
	if err != nil || ended != 1 {
		t.Fatalf("TakeOverClaims = %d, %v, want 1, nil", ended, err)
	}
	if diff := cmp.Diff([]string{"TakeOverClaims"}, inner.events); diff != "" {
		t.Errorf("what the store was told (-want +got):\n%s", diff)
	}
}

// The claims of a session of a decorated ClaimKeeper pass through around, and what the
// session is told reaches the store's session.
func TestDecorateKeepsClaimSessions(t *testing.T) {
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	inner := &keeper{claimer: &claimer{Store: memstore.New()}}
	var calls []decorate.Call
	s := decorate.Store(inner, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		calls = append(calls, c)
		return call(ctx)
	})
	session := s.(operations.ClaimKeeper).KeepClaims(ctx, time.Second, func() {})
	release, ok, err := session.ClaimRun(ctx, o)
	if err != nil || !ok {
		t.Fatalf("the session's ClaimRun(%s) returned %v and the error %v, want true and none", o, ok, err)
	}
	release()
	session.EndPass(1)
	session.EndIncompletePass()
	session.End()

	if diff := cmp.Diff([]decorate.Call{{Method: "ClaimRun", Owner: o}}, calls); diff != "" {
		t.Errorf("calls the decorator saw (-want +got):\n%s", diff)
	}
	want := []string{"KeepClaims(1s, wake true)", "ClaimRun(Backup/b)", "release(Backup/b)", "EndPass(1)", "EndIncompletePass", "End"}
	if diff := cmp.Diff(want, inner.events); diff != "" {
		t.Errorf("what the store's session was told (-want +got):\n%s", diff)
	}
}

// A session claim that around fails after the session granted it goes back to the
// session, and the claim is reported not made.
func TestDecorateSessionClaimFailed(t *testing.T) {
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	inner := &keeper{claimer: &claimer{Store: memstore.New()}}
	injected := errors.New("injected")
	s := decorate.Store(inner, func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
		_ = call(ctx)
		return injected
	})
	session := s.(operations.ClaimKeeper).KeepClaims(ctx, time.Second, nil)
	release, ok, err := session.ClaimRun(ctx, o)
	if !errors.Is(err, injected) || ok || release != nil {
		t.Errorf("the session's ClaimRun(%s) returned a release: %v, %v and the error %v; want none, false and %v", o, release != nil, ok, err, injected)
	}
	want := []string{"KeepClaims(1s, wake false)", "ClaimRun(Backup/b)", "release(Backup/b)"}
	if diff := cmp.Diff(want, inner.events); diff != "" {
		t.Errorf("what the store's session was told (-want +got):\n%s", diff)
	}
}

func TestDecorateSeesEveryCall(t *testing.T) {
	ctx := context.Background()
	var (
		callsMu sync.Mutex
		calls   []decorate.Call
	)
	inner := &claimer{Store: memstore.New()}
	s := decorate.Store(inner, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		callsMu.Lock()
		calls = append(calls, c)
		callsMu.Unlock()
		return call(ctx)
	})
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	op := operations.Operation{Owner: o, Action: "example.io/a", ID: "op-1", Status: operations.Status{Phase: operations.OperationNew}}
	other := operations.Owner{Kind: phase.Backup, Name: "c"}

	if err := s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New}); err != nil {
		t.Fatalf("CreateRun(%s) returned the error %q, want none", o, err)
	}
	if err := s.PutOperations(ctx, o, []operations.Operation{op}); err != nil {
		t.Fatalf("PutOperations(%s) returned the error %q, want none", o, err)
	}
	if _, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Warnings = 1; return nil }); err != nil {
		t.Fatalf("UpdateRun(%s) returned the error %q, want none", o, err)
	}
	got, err := s.GetRun(ctx, o)
	if err != nil || got.Warnings != 1 {
		t.Fatalf("GetRun(%s) returned Warnings %d and the error %v, want 1 and none", o, got.Warnings, err)
	}
	if runs, err := s.ListRuns(ctx, operations.RunFilter{}); err != nil || len(runs) != 1 {
		t.Fatalf("ListRuns returned %d runs and the error %v, want 1 and none", len(runs), err)
	}
	if g, err := s.GetOperation(ctx, o, "op-1"); err != nil || g.ID != "op-1" {
		t.Fatalf("GetOperation(%s, op-1) returned %q and the error %v, want op-1 and none", o, g.ID, err)
	}
	if ops, err := s.ListOperations(ctx, o, operations.OperationFilter{}); err != nil || len(ops) != 1 {
		t.Fatalf("ListOperations(%s) returned %d operations and the error %v, want 1 and none", o, len(ops), err)
	}
	var read []operations.PassRun
	err = s.(operations.PassReader).ReadPass(ctx, operations.RunFilter{}, func(page []operations.PassRun) error {
		read = append(read, page...)
		return nil
	})
	if err != nil || len(read) != 1 || len(read[0].Operations) != 1 {
		t.Fatalf("ReadPass read %d runs and the error %v, want 1 run of 1 operation and none", len(read), err)
	}
	moved := read[0].Operations[0]
	moved.Status.Phase = operations.OperationInProgress
	if err := s.(operations.PassReader).CommitPass(ctx, read[0], []operations.Operation{moved}); err != nil {
		t.Fatalf("CommitPass(%s) returned the error %q, want none", o, err)
	}
	if err := s.(operations.RunStarter).CreateRunWithOperations(ctx, operations.Run{Owner: other, Phase: phase.New}, nil); err != nil {
		t.Fatalf("CreateRunWithOperations(%s) returned the error %q, want none", other, err)
	}
	release, ok, err := s.(operations.RunClaimer).ClaimRun(ctx, o)
	if err != nil || !ok {
		t.Fatalf("ClaimRun(%s) returned %v and the error %v, want true and none", o, ok, err)
	}
	release()
	if inner.released != 1 {
		t.Errorf("the release ClaimRun(%s) returned gave up %d claims of the store, want 1", o, inner.released)
	}
	if err := s.DeleteRun(ctx, o); err != nil {
		t.Fatalf("DeleteRun(%s) returned the error %q, want none", o, err)
	}

	want := []decorate.Call{
		{Method: "CreateRun", Owner: o, Write: true},
		{Method: "PutOperations", Owner: o, Write: true},
		{Method: "UpdateRun", Owner: o, Write: true},
		{Method: "GetRun", Owner: o},
		{Method: "ListRuns"},
		{Method: "GetOperation", Owner: o},
		{Method: "ListOperations", Owner: o},
		{Method: "ReadPass"},
		{Method: "CommitPass", Owner: o, Write: true},
		{Method: "CreateRunWithOperations", Owner: other, Write: true},
		{Method: "ClaimRun", Owner: o},
		{Method: "DeleteRun", Owner: o, Write: true},
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls the decorator saw (-want +got):\n%s", diff)
	}
}

func TestDecorateErrors(t *testing.T) {
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	injected := errors.New("injected")
	tests := []struct {
		name    string
		s       operations.Store
		around  func(context.Context, decorate.Call, func(context.Context) error) error
		wantErr error
	}{
		{"the decorator's own error", memstore.New(), func(context.Context, decorate.Call, func(context.Context) error) error { return injected }, injected},
		{"the store's error, passed on", memstore.New(), func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error { return call(ctx) }, operations.ErrNotFound},
		{"no call and no error", memstore.New(), func(context.Context, decorate.Call, func(context.Context) error) error { return nil }, operations.ErrInvalid},
		{"a nil store", nil, nil, operations.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decorate.Store(tc.s, tc.around).GetRun(ctx, o)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("GetRun(%s) returned the error %v, want one wrapping %v", o, err, tc.wantErr)
			}
			if diff := cmp.Diff(operations.Run{}, r); diff != "" {
				t.Errorf("GetRun(%s) that failed returned a run (-want +got):\n%s", o, diff)
			}
		})
	}
}

// A nil around passes the calls through.
func TestDecorateNilAround(t *testing.T) {
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Restore, Name: "r"}
	s := decorate.Store(memstore.New(), nil)
	if err := s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New}); err != nil {
		t.Fatalf("CreateRun(%s) returned the error %q, want none", o, err)
	}
	if _, err := s.GetRun(ctx, o); err != nil {
		t.Fatalf("GetRun(%s) returned the error %q, want none", o, err)
	}
}

// A decorator that logs the writes to a store, and keeps its atomic start.
func ExampleStore() {
	ctx := context.Background()
	s := decorate.Store(memstore.New(), func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		err := call(ctx)
		if c.Write {
			fmt.Printf("%s %s: %v\n", c.Method, c.Owner, err)
		}
		return err
	})
	_, atomic := s.(operations.RunStarter)
	fmt.Println("atomic start:", atomic)

	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	op := operations.Operation{Owner: o, Action: "p", ID: "a", Status: operations.Status{Phase: operations.OperationNew}}
	err := s.(operations.RunStarter).CreateRunWithOperations(ctx, operations.Run{Owner: o, Phase: phase.New}, []operations.Operation{op})
	fmt.Println(err)
	// Output:
	// atomic start: true
	// CreateRunWithOperations Backup/nightly: <nil>
	// <nil>
}
