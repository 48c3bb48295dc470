package kv

import (
	"context"
	"fmt"
)

// A Backend is the small transactional key-value store the engine runs on. A driver
// (storage/memstore, storage/boltstore, storage/etcdstore, or a user's own) implements
// it; the engine implements every rule of the operations.Store contract on top of it, so
// a driver implements none of them.
//
// Keys are byte strings compared in byte order. Every key written holds a [Version]
// that changes on each write of that key and is never 0; an absent key has version 0.
// Versions need not be dense or shared between keys; a driver may use a global revision
// (etcd's ModRevision, a counter of commits) as every key's version.
//
// A Backend is safe for concurrent use. Every method returns ctx.Err(), possibly
// wrapped, when ctx is done before the work is, and then a Commit has written nothing.
type Backend interface {
	// Read calls fn with a Reader that sees one consistent snapshot of the backend,
	// taken when Read begins: no part of a Commit that ends after that is visible, and
	// every Commit that ended before is. Byte slices the Reader passes to fn, or to the
	// callbacks of its Scan, are valid only until that call returns: copy what you keep.
	// fn must not call Commit or Read on the same Backend (a driver may hold a lock
	// while fn runs). Read returns fn's error as it is.
	//
	// The engine decodes and checks what it reads within fn, so every damage it finds
	// (an error wrapping operations.ErrCorrupt) is an error that some Read returns: a
	// driver that stops writing once its data is found damaged, as storage/boltstore
	// does, sees each finding there.
	Read(ctx context.Context, fn func(Reader) error) error

	// Commit applies writes, all of them or none, if every condition in conds holds
	// when it is applied; otherwise it writes nothing and returns an error wrapping
	// [ErrConditionFailed]. A Commit that returned nil is durable to the driver's
	// promise (synced to disk for boltstore, quorum-committed for etcd). The caller
	// names a key at most once among conds and once among single-key writes (the engine
	// always does); a driver may refuse a Commit that does not, as etcd does, or apply
	// it in order. Commit never keeps or changes the
	// slices it is given. A Commit larger than [Limits] fails with an error wrapping
	// [ErrTooLarge] and writes nothing. Conditions name single keys, and no other write
	// of a Commit falls in the range of a range delete (etcd refuses that).
	Commit(ctx context.Context, conds []Condition, writes []Write) error

	// Limits reports the largest Commit the driver takes. The engine never asks for
	// more: it splits what does not fit (see the package documentation).
	Limits() Limits
}

// A Reader reads one consistent snapshot; see [Backend.Read].
type Reader interface {
	// Get returns the value and version of key, or nil and 0 when key is absent.
	Get(ctx context.Context, key []byte) (value []byte, v Version, err error)
	// Scan calls fn for every key in [start, end), in byte order, and stops at the
	// first error fn returns, returning it; an empty end means no upper bound. A
	// driver may fetch the range in pages, but every page comes from the same snapshot.
	Scan(ctx context.Context, start, end []byte, fn func(key, value []byte, v Version) error) error
}

// A Version identifies one write of a key. 0 means the key is absent.
type Version uint64

// A Condition holds when Key's current version is Version (0: Key is absent).
type Condition struct {
	Key     []byte
	Version Version
}

// A Write sets Key to Value, or deletes Key when Delete is true (deleting an absent key
// is not an error). A delete with a non-empty End deletes every key in [Key, End)
// instead; it counts as one write against [Limits.MaxOps], whatever it deletes.
type Write struct {
	Key    []byte
	Value  []byte
	Delete bool
	End    []byte
}

// Limits bounds one [Backend.Commit]. A zero field means no limit.
type Limits struct {
	// MaxOps is the most conditions plus writes one Commit may hold (etcd's default
	// --max-txn-ops is 128).
	MaxOps int
	// MaxBytes is the most bytes of keys and values one Commit may hold (etcd's
	// default --max-request-bytes is 1.5 MiB).
	MaxBytes int
}

// Check returns nil when l takes one [Backend.Commit] of conds and writes, and otherwise
// an error wrapping [ErrTooLarge] that gives the Commit's size and l. A Commit counts
// its conditions plus its writes against MaxOps, and the bytes of their keys, values
// and range ends against MaxBytes. A driver calls Check in Commit before it writes
// anything, so that every driver counts as the engine does when it splits a batch.
func (l Limits) Check(conds []Condition, writes []Write) error {
	ops, bytes := commitSize(conds, writes)
	if l.allows(ops, bytes) {
		return nil
	}
	return fmt.Errorf("commit of %d operations and %d bytes, limits %d operations and %d bytes: %w", ops, bytes, l.MaxOps, l.MaxBytes, ErrTooLarge)
}

// allows reports whether l takes a Commit of ops conditions and writes holding bytes
// bytes (see [Limits.Check]).
func (l Limits) allows(ops, bytes int) bool {
	return (l.MaxOps <= 0 || ops <= l.MaxOps) && (l.MaxBytes <= 0 || bytes <= l.MaxBytes)
}

// commitSize returns what a Commit of conds and writes counts against [Limits].
func commitSize(conds []Condition, writes []Write) (ops, bytes int) {
	for _, c := range conds {
		bytes += len(c.Key)
	}
	for _, w := range writes {
		bytes += len(w.Key) + len(w.Value) + len(w.End)
	}
	return len(conds) + len(writes), bytes
}
