package kv

import "errors"

// ErrConditionFailed is returned by [Backend.Commit] when a condition does not hold.
var ErrConditionFailed = errors.New("kv: condition failed")

// ErrTooLarge is returned by [Backend.Commit] when a commit exceeds the driver's [Limits],
// and by the engine for a record that alone exceeds them.
var ErrTooLarge = errors.New("kv: commit too large")

// ErrFormat is returned by [Open] when the backend holds keys of another format: not an
// itemops store, or one written by a release whose layout this one does not read. Open
// leaves such a backend as it found it.
var ErrFormat = errors.New("kv: not a store of this format")

// ErrClosed is returned by every method of a nil *[Store], so that a driver that embeds
// one gives its zero value that error, and by a driver's [Backend] after the driver has
// closed it. Drivers export it as their own ErrClosed.
var ErrClosed = errors.New("store is closed")
