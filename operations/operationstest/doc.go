// Package operationstest provides fakes and helpers for testing code that uses package
// operations: a scriptable [Tracker] that counts its calls, a [Resolver] of a fixed set
// of them, a [Counter] that counts the calls of the plugins another resolver (an
// adapters.Registry) resolves, and helpers that turn what a store holds into values a
// test compares with go-cmp: [RunPhases] and [RunEvents] read a run's history,
// [OperationPhases] a run's operations. Use a real store (storage/memstore, or
// storage/boltstore in a temporary directory) beside them rather than a fake one, and the
// fake clock of package clock/clocktest for anything that waits or times out.
package operationstest
