// Package operationstest provides fakes for testing code that uses package operations: a
// [Clock] whose time moves only when the test says, and a scriptable [Tracker] that
// counts its calls. Use a real store (storage/memstore, or storage/boltstore in a
// temporary directory) beside them rather than a fake one.
package operationstest
