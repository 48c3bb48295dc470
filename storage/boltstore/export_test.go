package boltstore

// ErrPageReachedTwice is what the check's error wraps, beside ErrCorrupt, for a page
// reached twice from the root.
var ErrPageReachedTwice = errPageReachedTwice
