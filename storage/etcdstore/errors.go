package etcdstore

import (
	"errors"

	"github.com/itemops/itemops/storage/kv"
)

// ErrUnavailable is returned when etcd does not answer a request within
// [Options.RequestTimeout], has no leader, cannot be reached, or when the caller's
// client has been closed. The error says which. When it comes from a write, the write
// may or may not have been made (etcd may have applied it before the answer was lost);
// either way it was made whole or not at all.
var ErrUnavailable = errors.New("etcd unavailable")

// ErrNotStore is returned by [Open] when the prefix holds keys but no itemops format
// marker, or a marker of another format. Open writes nothing then.
var ErrNotStore = errors.New("prefix holds no itemops etcdstore")

// ErrSchemaVersion is returned by [Open] when the store under the prefix was written with
// a schema version this package does not read: by a newer release of itemops, or
// schema 1, by the release before the kv engine (see the package documentation).
var ErrSchemaVersion = errors.New("unsupported schema version")

// ErrClosed is returned by every method of a [Store] after [Store.Close], and of the
// zero Store. It is kv.ErrClosed, which the engine returns for a Store without one.
var ErrClosed = kv.ErrClosed
