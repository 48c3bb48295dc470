package kv

import (
	"context"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A Partition names the keys that one commit of a [PartitionedBackend] may touch: the
// keys of one run, named by the run's kind and name, or, for the zero Partition, the
// global keys (the format key). Every key of the engine belongs to exactly one
// partition, and no commit of the engine touches keys of two.
type Partition struct {
	Kind phase.Kind
	Name string
}

// partitionOf returns the partition of the run of o.
func partitionOf(o operations.Owner) Partition { return Partition{Kind: o.Kind, Name: o.Name} }

// owner returns the owner, without UID, whose run p holds.
func (p Partition) owner() operations.Owner { return operations.Owner{Kind: p.Kind, Name: p.Name} }

// A RunChange tells a [PartitionedBackend] what one commit does to the run of its
// partition, so that a driver can keep the runs' phases where it lists them from (an
// index of its own, labels of an object), and show a summary of each run, without
// reading the engine's keys. The zero RunChange leaves the run's record and
// operations as they are.
type RunChange struct {
	// Record is the run's record as the commit writes it (the value the commit also
	// writes under the run's key), or nil when the commit leaves the record as it is or
	// deletes the run. It is valid only until CommitPartition returns.
	Record []byte
	// Phase is Record's phase, and UID the UID of Record's owner (operations.Owner.UID).
	Phase phase.Phase
	UID   string
	// History is Record's phase history (operations.Run.History), oldest first, when
	// Record is set. It is valid only until CommitPartition returns.
	History []operations.Transition
	// Added is how many operations the commit adds to the run, and Finished how many
	// operations it leaves in a finished phase that were not (new ones included). An
	// operation never leaves a finished phase, so a driver that adds them up over the
	// commits of a run, from its creation, holds the number of the run's operations
	// and of those finished; a commit that stages a batch (see the package
	// documentation) counts it at its commit point.
	Added, Finished int
	// From is the run's phase before the commit, when the commit writes Record or
	// deletes the run; it is empty when the commit creates the run.
	From phase.Phase
	// Delete says that the commit deletes the run and every key of its partition.
	Delete bool
}

// A PartitionedBackend is a backend whose unit of atomicity is one [Partition]: one
// run's keys, or the global keys. A driver whose every object is atomic alone (an
// object of the Kubernetes API, a row of its own) implements it in place of [Backend]:
// the engine never commits keys of two partitions at once, reads one partition at a
// time, and lists runs by one call. [Open] gives a Backend's engine the same view of
// it, so every driver runs the same engine. Keys, versions, values, conditions and
// writes mean what they mean for a Backend; a PartitionedBackend is safe for concurrent
// use, and every method returns ctx.Err(), possibly wrapped, when ctx is done before
// the work is, and then a commit has written nothing.
type PartitionedBackend interface {
	// ReadPartition calls fn with a Reader that sees one consistent snapshot of the keys
	// of p, as [Backend.Read] does for every key. A Scan of the global partition with
	// no bounds (start and end empty) also sees the keys of every other partition: the
	// engine uses it only to learn whether the backend holds any key at all, and stops
	// at the first. ReadPartition returns fn's error as it is.
	ReadPartition(ctx context.Context, p Partition, fn func(Reader) error) error

	// CommitPartition applies writes, all of them or none, if every condition in conds
	// holds, as [Backend.Commit] does; every key of conds and writes, and every range of
	// a range delete, lies in p. run says what the commit does to p's run (the zero
	// RunChange for the global partition, and for commits that leave the run's record
	// as it is). CommitPartition never keeps or changes the slices it is given.
	CommitPartition(ctx context.Context, p Partition, run RunChange, conds []Condition, writes []Write) error

	// ScanRuns calls fn, from one consistent snapshot, with the partition and the record
	// of every run that f selects, in any order, and stops at the first error fn
	// returns, returning it. When f names phases, indexed is the phase under which the
	// backend found the run (the engine refuses a record of another phase as
	// operations.ErrCorrupt); otherwise it is empty. A kind in f that is not a valid
	// kind selects no run. record is valid only until fn returns.
	ScanRuns(ctx context.Context, f operations.RunFilter, fn func(p Partition, indexed phase.Phase, record []byte) error) error

	// Limits reports the largest commit the driver takes, as [Backend.Limits] does. The
	// engine counts against it a commit's conditions and writes, as [Limits.Check]
	// does, together with the writes of the phase index entries that its RunChange
	// makes in the layout of a Backend (see the package documentation), so a driver
	// that keeps the phase elsewhere may count them as its own.
	Limits() Limits
}

// OpenPartitioned returns the engine over b, as [Open] returns it over a [Backend]: it
// writes the format key into a backend that holds no key, and fails as Open does.
func OpenPartitioned(ctx context.Context, b PartitionedBackend, opts ...Option) (*Store, error) {
	return open(ctx, b, opts...)
}
