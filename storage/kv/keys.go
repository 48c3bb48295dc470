package kv

import (
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/internal/layout"
)

// The keys and values of the engine are those of package storage/internal/layout; the
// package documentation draws them ("# Layout").

// keyArena hands out keys cut from one buffer, so that a batch's keys cost an
// allocation for a few hundred rather than one each. A key it returns stays valid when
// it grows.
type keyArena struct{ buf []byte }

// record returns the key of layout.RecordKey.
func (a *keyArena) record(prefix []byte, seq uint64, code byte) []byte {
	start := len(a.buf)
	a.buf = layout.AppendRecordKey(a.buf, prefix, seq, code)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// end returns the smallest key after every key that starts with prefix, or nil when
// there is none (prefix is all 0xff).
func end(prefix []byte) []byte {
	e := append([]byte(nil), prefix...)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}

// notFoundIfInvalid checks an owner that a call reads or changes the run of, before the
// call reads anything: an owner that no run can have (one that fails
// operations.Owner.Validate, a name too long included) has none, so it returns an error
// wrapping operations.ErrNotFound.
func notFoundIfInvalid(o operations.Owner) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", operations.ErrNotFound, err)
	}
	return nil
}
