package kv

import (
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/internal/layout"
)

// WaitingWrites returns how many writes of o's run wait for their turn in s.
func WaitingWrites(s *Store, o operations.Owner) int {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	if q := s.turns.runs[string(layout.RunKey(o))]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// RunsWritten returns how many runs s keeps a queue of turns for.
func RunsWritten(s *Store) int {
	s.turns.mu.Lock()
	defer s.turns.mu.Unlock()
	return len(s.turns.runs)
}

// StagedMeta returns the key of the operations metadata of o's run, and a value of it
// that names a staged batch, as a write that has passed its commit point leaves it.
func StagedMeta(o operations.Owner) (key, value []byte) {
	return layout.OpsKey(layout.OpsPrefix(o), layout.OpsMeta), layout.Meta{Next: 1, Batches: 1, Staged: 1}.Append(nil)
}

// QueuedCommits returns how many commits wait in s for a group to write them.
func QueuedCommits(s *Store) int {
	c := s.b.(*flat).commits
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// StagedChunkKey returns the key of chunk n of the staged batch that the value of
// StagedMeta names.
func StagedChunkKey(o operations.Owner, n int) []byte {
	return layout.StagedKey(layout.OpsPrefix(o), 1, n)
}

// RunKey returns the key of the record of o's run.
func RunKey(o operations.Owner) []byte { return layout.RunKey(o) }

// BatchNumbers makes a Store number its staged batches with next, in place of random
// numbers, so that a test can compare what it writes byte for byte.
func BatchNumbers(next func() uint64) Option { return func(s *Store) { s.nextBatch = next } }
