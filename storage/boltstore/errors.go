package boltstore

import "errors"

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

// ErrCorrupt is returned when a stored record or index entry cannot be decoded or
// contradicts another. Nothing is written by the call that meets it.
var ErrCorrupt = errors.New("corrupt store")

// ErrClosed is returned by every method of a [Store] after [Store.Close].
var ErrClosed = errors.New("store is closed")
