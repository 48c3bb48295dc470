// Package operationstest provides fakes for testing code that uses package operations: a
// scriptable [Tracker] that counts its calls, and a [Resolver] of a fixed set of them.
// Use a real store (storage/memstore, or storage/boltstore in a temporary directory)
// beside them rather than a fake one, and the fake clock of package clock/clocktest for
// anything that waits or times out.
package operationstest
