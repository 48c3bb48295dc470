package kv_test

import (
	"testing"

	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/storetest"
)

// Every method of a nil *Store fails with ErrClosed, so that a driver that embeds one
// needs no methods of its own for its zero value.
func TestNilStoreIsClosed(t *testing.T) {
	storetest.RunClosed(t, (*kv.Store)(nil), kv.ErrClosed)
}
