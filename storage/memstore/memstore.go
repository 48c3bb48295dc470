// Package memstore is an [operations.Store] that keeps its records in memory, for tests
// and for single-process programs whose records need not outlive the process.
//
// It is the storage engine of storage/kv over an ordered map in memory ([NewBackend]),
// so it keeps every rule of the [operations.Store] contract exactly as the durable stores
// do, and passes storage/storetest.
//
// # Limits
//
// Nothing is durable: the records die with the process (or with the [Store] value), and
// two processes never see each other's records. Memory grows with every run and
// operation stored until [kv.Store.DeleteRun] removes them; there is no eviction. Use
// storage/boltstore when records must survive a restart.
//
// # Behaviour
//
// Values are encoded on the way in and decoded on the way out, so a caller never aliases
// stored data. Keys are kept in order in blocks of 128, so a lookup costs two binary
// searches and a write moves at most one block's entries. Reads share one lock and run
// in parallel; each write holds it alone for the time it applies its keys, never while
// the caller's code runs.
package memstore

import (
	"context"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// A Store is an [operations.Store] in memory: the engine of storage/kv over the backend
// of [NewBackend]. Create one with [New]; the zero Store is not usable. A Store is safe
// for concurrent use. Its update functions must not call the Store (see
// [kv.Store.UpdateRun]).
type Store struct {
	*kv.Store
}

var (
	_ operations.Store      = (*Store)(nil)
	_ operations.RunStarter = (*Store)(nil)
)

// New returns an empty Store, ready to use.
func New() *Store {
	s, err := kv.Open(context.Background(), NewBackend(kv.Limits{}))
	if err != nil {
		// An empty backend in memory cannot refuse its format key.
		panic(fmt.Sprintf("memstore: %v", err))
	}
	return &Store{Store: s}
}
