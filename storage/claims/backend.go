package claims

import (
	"context"
	"errors"
	"time"

	"github.com/itemops/itemops/operations"
)

// ErrSessionLost is returned by [Backend.Claim] when the session it was given has lost
// its liveness (an etcd lease that expired, a Lease that another replica judged dead)
// and so cannot hold a claim. The backend makes the session report [Session.Lost] before
// it returns the error, so that the next [Backend.Session] starts another.
var ErrSessionLost = errors.New("the claims session is lost")

// A Backend keeps the claims of one store: a claim on a run is an object of the backend
// (a key, a Lease) bound to the [Session] of the store that holds it, which stops
// counting when that session stops being renewed. The [Claimer] decides what to claim,
// keep, give up and hand over; the Backend only reads and writes.
//
// Every method is safe for concurrent use. Versions are the backend's own and opaque,
// never empty: a version names one write of an object, so that a change made "at
// version v" is made only if nobody wrote the object since. The methods that take a
// context stop when it ends; those that do not wait at most [Backend.Timeout].
type Backend interface {
	// Ready returns an error when the store is closed (the store's own sentinel), and
	// else ctx.Err().
	Ready(ctx context.Context) error
	// Timeout bounds the requests made for a Claimer outside any caller's context:
	// releases, the ends of passes and of sessions.
	Timeout() time.Duration
	// Key returns the name of the claim on the run of o: one per kind and name, the
	// same for every UID. o is valid.
	Key(o operations.Owner) string
	// Session returns the store's live session, starting one when there is none or
	// the last one was lost. It fails as Ready does, or with the backend's error.
	Session(ctx context.Context) (Session, error)
	// Claim writes the claim key for ss: when ifVersion is "", only if no live claim
	// holds key (no object, or one whose session is dead), and else only if the claim
	// is at ifVersion. It returns the version it wrote; when the condition failed, the
	// claim found instead (nil when there was none any more), which is ss's own when
	// an earlier attempt of this very write was applied and its answer lost. It fails
	// with ErrSessionLost when ss is lost, and with the backend's error when it cannot
	// tell; then the claim may have been written all the same. It waits at most
	// Timeout, whether ctx ends or not.
	Claim(ctx context.Context, key string, ss Session, ifVersion string) (version string, cur *Claim, err error)
	// Abandon deletes the claim key if ss holds it, waiting at most Timeout.
	Abandon(key string, ss Session)
	// Apply makes each change if its object is at its version, and returns the
	// version each change wrote ("" for a delete, or a change not made). It waits as
	// long as ctx lets it. A change whose answer did not come may have been made all
	// the same, and its version is "" too: the Claimer forgets every claim it changes,
	// so that a claim left with this store's session is adopted by the store's next
	// claim of the run (or ends with the session), and a hand-over made unknown to it
	// is one that another store may take.
	Apply(ctx context.Context, changes []Change) []string
	// Join writes the member object of a claim session, numbered seq in this process,
	// bound to ss, and returns its name and version.
	Join(ctx context.Context, ss Session, seq int64) (member, version string, err error)
	// ListClaims reads the live claims, hand-overs included, at once.
	ListClaims(ctx context.Context) ([]Claim, error)
	// Census reads at once how many live claims there are (hand-overs included), the
	// names of the live members, and a point from which WatchMembers sees what comes
	// after the read.
	Census(ctx context.Context) (Census, error)
	// WatchMembers calls joined when a member object is created after the point from,
	// until ctx ends or the watch fails, and then returns. It returns nil when ctx ended,
	// or when the backend ended the watch as it does now and then (a watch closed by its
	// server, or the point from compacted away): the next census starts another watch,
	// and counts what joined in between. It returns the backend's error otherwise.
	WatchMembers(ctx context.Context, from string, joined func()) error
	// EndOthers ends the session of every other store of the backend, never this
	// store's own, so that the claims and members bound to them stop counting at once,
	// and returns how many it ended. It fails with the backend's error or ctx.Err(),
	// having ended some of them, counted, or none.
	EndOthers(ctx context.Context) (ended int, err error)
}

// A Session is what keeps a store's claims alive: while the store renews it, its claims
// count; once it is lost, they do not.
type Session interface {
	// ID names the session in the claims it holds ([Claim.Holder]).
	ID() string
	// Lost reports whether the session has stopped being renewed.
	Lost() bool
}

// A Claim is a claim as the backend holds it.
type Claim struct {
	Key     string
	Holder  string // the ID of the session that holds it
	Version string
	// HandedOver says that the holder handed the run over; another may take it from
	// Free on.
	HandedOver bool
	Free       time.Time
}

// A Change is a change that [Backend.Apply] makes to the claim or member Key if it is at
// Version: a delete, or, with HandOver, a hand-over of the claim, free from Free and
// bound to Session.
type Change struct {
	Key, Version string
	HandOver     bool
	Free         time.Time
	Session      Session
}

// A Census is what [Backend.Census] read.
type Census struct {
	Claims  int64
	Members []string
	From    string // where a watch of the members starts
}
