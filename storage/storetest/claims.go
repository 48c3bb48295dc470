package storetest

import (
	"context"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// RunClaims checks a store that keeps claims in sessions, an [operations.ClaimKeeper]
// (storage/etcdstore is one), against the contract of its sessions
// ([operations.ClaimSession]): a claim made under a session stays with it when released,
// until the session's next claim takes it back, while other claimers find the run held;
// a pass's end, complete or not, leaves a claim of that pass with the session; End gives
// up the claims the session keeps, and a claim in use when End is called is given up by
// its release; a claim with a done context or an invalid owner fails and leaves no
// claim. Each check starts one session at a time, so that no share of runs is handed to
// another. A store that is not an operations.ClaimKeeper fails every check: a decorator
// type that embeds the operations.Store it wraps hides the ability (build decorators
// with decorate.Store, which keeps it). newStore is called once per check and must
// return an empty store, as for [Run].
func RunClaims[T TB[T]](t T, newStore func(t T) operations.Store) {
	t.Helper()
	runEach(t, newStore, []check{
		{"KeptFromPassToPass", testKeptFromPassToPass},
		{"EndGivesUp", testEndGivesUp},
		{"EndLeavesClaimInUseToRelease", testEndLeavesClaimInUse},
		{"FailedClaimLeavesNoClaim", testFailedSessionClaim},
	})
}

// claimInterval is the interval of the sessions of the claim checks: longer than any
// check, so that a session hands nothing over for a time to pass.
const claimInterval = time.Hour

// claimFixture stores a waiting run and returns the store as a ClaimKeeper, with its
// owner.
func claimFixture(t tb, s operations.Store) (operations.ClaimKeeper, operations.Owner) {
	t.Helper()
	k, ok := s.(operations.ClaimKeeper)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.ClaimKeeper, so the Run of a Monitor cannot keep its claims from pass to pass: "+
			"a decorator type that embeds the operations.Store it wraps hides that ability of the store (decorate.Store keeps it)", s)
	}
	o := backup("claimed")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))
	return k, o
}

// wantClaim claims the run of o with claim and checks that ok is want; it returns the
// release function when the claim was made.
func wantClaim(t tb, claim func(context.Context, operations.Owner) (func(), bool, error), o operations.Owner, want bool, by string) func() {
	t.Helper()
	release, ok, err := claim(bg, o)
	noError(t, err, "ClaimRun(%s) by %s", o, by)
	if ok != want {
		t.Fatalf("ClaimRun(%s) by %s reported ok %v, want %v", o, by, ok, want)
	}
	if ok && release == nil {
		t.Fatalf("ClaimRun(%s) by %s reported ok with a nil release function", o, by)
	}
	return release
}

// testKeptFromPassToPass checks that a session's claim, released, stays with the session
// through the end of a pass, complete or not, and that the session takes it back, while
// a claim outside the session finds the run held whenever the session's Monitor uses it.
func testKeptFromPassToPass(t tb, s operations.Store) {
	k, o := claimFixture(t, s)
	session := k.KeepClaims(bg, claimInterval, nil)
	if session == nil {
		t.Fatalf("KeepClaims returned a nil session")
	}
	defer session.End()
	for _, endPass := range []func(){func() { session.EndPass(1) }, session.EndIncompletePass, func() { session.EndPass(1) }} {
		release := wantClaim(t, session.ClaimRun, o, true, "the session")
		wantClaim(t, session.ClaimRun, o, false, "the session, whose claim is in use")
		wantClaim(t, k.ClaimRun, o, false, "the store, outside the session, while the session's claim is in use")
		release()
		release() // a second call does nothing
		endPass()
	}
	release := wantClaim(t, session.ClaimRun, o, true, "the session, after three passes")
	release()
}

// testEndGivesUp checks that End gives up the claims the session keeps, and that a
// second End does nothing.
func testEndGivesUp(t tb, s operations.Store) {
	k, o := claimFixture(t, s)
	session := k.KeepClaims(bg, claimInterval, nil)
	wantClaim(t, session.ClaimRun, o, true, "the session")()
	session.EndPass(1)
	session.End()
	session.End()
	release := wantClaim(t, k.ClaimRun, o, true, "the store, after the session ended")
	release()
	release = wantClaim(t, k.ClaimRun, o, true, "the store, after its claim was released")
	release()
}

// testEndLeavesClaimInUse checks that a claim in use when the session ends stays held
// until its release gives it up.
func testEndLeavesClaimInUse(t tb, s operations.Store) {
	k, o := claimFixture(t, s)
	session := k.KeepClaims(bg, claimInterval, nil)
	release := wantClaim(t, session.ClaimRun, o, true, "the session")
	session.End()
	wantClaim(t, k.ClaimRun, o, false, "the store, while the ended session's claim is in use")
	release()
	wantClaim(t, k.ClaimRun, o, true, "the store, once the ended session's claim was released")()
}

// testFailedSessionClaim checks that a session's claim fails with a done context (with
// an error wrapping the context's) and with an invalid owner (operations.ErrInvalid),
// and that neither leaves a claim behind.
func testFailedSessionClaim(t tb, s operations.Store) {
	k, o := claimFixture(t, s)
	session := k.KeepClaims(bg, claimInterval, nil)
	defer session.End()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, ok, err := session.ClaimRun(ctx, o)
	wantError(t, err, context.Canceled, "ClaimRun(%s) by the session with a cancelled context", o)
	if ok {
		t.Errorf("ClaimRun(%s) by the session with a cancelled context reported ok", o)
	}
	_, ok, err = session.ClaimRun(bg, operations.Owner{Kind: phase.Backup})
	wantError(t, err, operations.ErrInvalid, "ClaimRun of an owner without a name by the session")
	if ok {
		t.Errorf("ClaimRun of an owner without a name by the session reported ok")
	}
	wantClaim(t, k.ClaimRun, o, true, "the store, after the session's failed claims")()
}
