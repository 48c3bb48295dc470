package boltstore

import (
	"errors"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// ErrLocked is returned by [Open] when another [Store], in this process or another, holds
// the file and does not release it within [Options.Timeout].
var ErrLocked = errors.New("file is locked by another store")

// ErrNotStore is returned by [Open] when the file is not an itemops store: not a bbolt
// file, or a bbolt file that holds other data. Open leaves such a file as it found it.
var ErrNotStore = errors.New("not an itemops boltstore file")

// ErrSchemaVersion is returned by [Open] when the file was written with a schema version
// this package does not read, usually by a newer release of itemops. Open leaves the file
// as it found it.
var ErrSchemaVersion = errors.New("unsupported schema version")

// ErrCorrupt is [operations.ErrCorrupt], returned when the file is damaged: a page that
// fails bbolt's checks, a record or index entry that does not decode or contradicts
// another. The error that wraps it names the file and what was found. Once a Store has
// met it, it writes nothing more (see the package documentation, "Damage").
var ErrCorrupt = operations.ErrCorrupt

// errPageReachedTwice is wrapped, beside ErrCorrupt, by the error of the check of a file
// (at Open, and Store.Check) in which a page is reached twice from the root: a cycle, a
// page with two parents, or a free page in use. bbolt's own reads may loop forever or
// overflow the stack on such a file, so nothing but the check may read it. It is
// unexported: a caller knows such a file by ErrCorrupt, and the message names the page.
var errPageReachedTwice = errors.New("reached twice")

// ErrReadOnly is returned by every write of a [Store] opened with [Options.ReadOnly].
var ErrReadOnly = errors.New("store is opened read-only")

// ErrClosed is returned by every method of a [Store] after [Store.Close], and of the
// zero Store. It is kv.ErrClosed, which the engine returns for a Store without one.
var ErrClosed = kv.ErrClosed
