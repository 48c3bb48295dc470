package kv

import (
	"context"
	"sync"
)

// A GroupCommitter is a [Backend] whose commits each carry a large fixed cost (a sync to
// disk, a round trip) and that can apply several independent commits in one transaction.
// The engine finds it by a type assertion and then commits in groups: while one
// transaction is being written, the commits that other goroutines make queue up, and
// the next transaction takes them all (group commit). A commit made while no other is
// being written goes through at once, without waiting for company.
//
// storage/boltstore implements it, its concurrent writers then sharing one sync to disk;
// it is exported for the author of any other driver whose commits cost the same way (a
// file, a database with a round trip per transaction), who gets group commit by
// implementing it alone: the engine's side is generic, and the conformance suite of
// drivers (Run of storage/kv/kvtest) checks a driver that has it.
type GroupCommitter interface {
	Backend
	// CommitGroup applies the commits of group in order, in one transaction, each as
	// [Backend.Commit] would apply it alone: a commit whose conditions do not hold, as
	// the keys stand after the commits before it, writes nothing and gets an error
	// wrapping [ErrConditionFailed] in errs[i]; the others are applied and get nil. When
	// CommitGroup returns, every commit it applied is as durable as a Commit that
	// returned nil. When the transaction fails as a whole (a write refused, the disk, a
	// damaged file), it writes nothing and returns the error as err; the engine then
	// commits each of the group alone, so that only those that must fail do. The group
	// is never larger than [Backend.Limits] allows one Commit to be.
	CommitGroup(ctx context.Context, group []Commit) (errs []error, err error)
}

// A Commit is the conditions and writes of one commit of a group.
type Commit struct {
	Conds  []Condition
	Writes []Write
}

// maxGroup bounds the commits of one group on a backend without limits, so that one
// transaction stays a moderate size.
const maxGroup = 256

// A committer sends the engine's commits to its backend, in groups when the backend is
// a GroupCommitter.
type committer struct {
	b      Backend
	group  GroupCommitter // nil: every commit goes alone
	limits Limits

	mu      sync.Mutex
	queue   []*queued // commits waiting for a transaction, oldest first
	leading bool      // a goroutine is writing a group
}

// A queued commit waits for the transaction that writes it. turn receives true when
// its goroutine is to write the next group itself, false when its commit was written
// (then err is its outcome).
type queued struct {
	c          Commit
	ops, bytes int // what c counts against the backend's Limits
	err        error
	turn       chan bool
}

func newCommitter(b Backend) *committer {
	c := &committer{b: b, limits: b.Limits()}
	c.group, _ = b.(GroupCommitter)
	return c
}

// commit applies conds and writes as Backend.Commit does. On a GroupCommitter it queues
// them: when no group is being written, the caller writes a group at once, made of its
// commit and any that queued meanwhile; otherwise it waits for its commit to be written
// by another's group, or for its turn to write the next. ctx is looked at before the
// commit is queued; once queued, the commit is written whatever happens to ctx, since
// other writers' commits share its transaction.
func (c *committer) commit(ctx context.Context, conds []Condition, writes []Write) error {
	if c.group == nil {
		return c.b.Commit(ctx, conds, writes)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q := &queued{c: Commit{Conds: conds, Writes: writes}, turn: make(chan bool, 1)}
	q.ops, q.bytes = commitSize(conds, writes)
	c.mu.Lock()
	c.queue = append(c.queue, q)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if !lead {
		lead = <-q.turn
	}
	if lead {
		c.writeGroup(ctx)
	}
	return q.err
}

// writeGroup takes the commits at the front of the queue (the caller's first among
// them) that fit one transaction, writes them, and hands the next turn to the oldest
// commit still queued, or ends the turns when none is. ctx is the caller's: a group of
// the caller's commit alone is written as Backend.Commit writes it, under ctx.
func (c *committer) writeGroup(ctx context.Context) {
	c.mu.Lock()
	n, ops, bytes := 0, 0, 0
	for _, q := range c.queue {
		if n > 0 && (n == maxGroup || !c.limits.allows(ops+q.ops, bytes+q.bytes)) {
			break
		}
		n, ops, bytes = n+1, ops+q.ops, bytes+q.bytes
	}
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()

	if len(group) == 1 {
		group[0].err = c.b.Commit(ctx, group[0].c.Conds, group[0].c.Writes)
	} else {
		// The group's transaction is not cut short by any one writer's ctx.
		ctx := context.WithoutCancel(ctx)
		commits := make([]Commit, len(group))
		for i, q := range group {
			commits[i] = q.c
		}
		errs, err := c.group.CommitGroup(ctx, commits)
		for i, q := range group {
			if err != nil {
				q.err = c.b.Commit(ctx, q.c.Conds, q.c.Writes)
			} else {
				q.err = errs[i]
			}
		}
	}

	c.mu.Lock()
	if len(c.queue) == 0 {
		c.leading = false
	} else {
		c.queue[0].turn <- true
	}
	c.mu.Unlock()
	for _, q := range group[1:] {
		q.turn <- false
	}
}
