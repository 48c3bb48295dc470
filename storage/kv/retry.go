package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/itemops/itemops/operations"
)

// Every write of the engine is a read followed by a Commit on condition that what it
// read is unchanged. retry and writeRun are the one loop that tries such a write again
// when it loses a race to a concurrent writer, so that every write, and every apply of a
// staged batch, is tried at most s.attempts times.

// errLost is what one try of a write returns when it lost a race and is to be tried
// again on what is stored then: its Commit's conditions no longer held (see [lost]), or
// it found a batch of another write staged, and applied it first. It never leaves the
// engine: retry tries again, or fails with operations.ErrConflict.
var errLost = errors.New("lost a race to a concurrent write")

// lost returns errLost when err is a Commit's failed condition, and err otherwise.
func lost(err error) error {
	if errors.Is(err, ErrConditionFailed) {
		return errLost
	}
	return err
}

// retry calls try until it returns something other than errLost, which it returns, at
// most s.attempts times: after that many lost races it fails with an error wrapping
// operations.ErrConflict. Between tries it backs off a little, at random, so that
// writers that keep colliding spread out; a ctx done meanwhile ends it with ctx.Err().
func (s *Store) retry(ctx context.Context, try func() error) error {
	for n := 1; ; n++ {
		err := try()
		if !errors.Is(err, errLost) {
			return err
		}
		if n >= s.attempts {
			return fmt.Errorf("lost to concurrent writers %d times: %w", n, operations.ErrConflict)
		}
		if err := backoff(ctx, n); err != nil {
			return err
		}
	}
}

// backoff waits before the next try of a write that lost n races (from 1): not at all
// after the first two, then up to n×100µs, at most 2ms. It returns ctx.Err().
func backoff(ctx context.Context, n int) error {
	if n > 2 {
		d := time.Duration(rand.Int64N(int64(min(n, 20)) * int64(100*time.Microsecond)))
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// writeRun waits for the turn of the run whose key is rk (see [turns]), then calls try
// as retry does, holding the turn until the last try returns. It fails as retry does,
// and with ctx.Err() when ctx ends while the write waits for its turn.
func (s *Store) writeRun(ctx context.Context, rk []byte, try func() error) error {
	w, err := s.turns.wait(ctx, string(rk))
	if err != nil {
		return err
	}
	defer w.done()
	return s.retry(ctx, try)
}
