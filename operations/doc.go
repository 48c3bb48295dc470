// Package operations keeps the records of backups and restores ("runs") and of the
// long-running operations their plugins start, and defines the [Store] every backend
// implements.
//
// # Records
//
// A [Run] holds one backup's or restore's phase, the profile of its phase machine, its
// counters and its phase history; [Run.SetPhase] is how its phase changes. An [Operation]
// is one plugin operation of a run: the plugin's name, the item, the operation ID, and
// its [Status], which is updated from the [Progress] the plugin reports.
//
// # Storage
//
// A [Store] is context-first and safe for concurrent use. It checks every write with the
// exported validators ([Run.Validate], [ValidateRunUpdate], [ValidateBatch],
// [ValidateOperationUpdate]), so that backends agree on what is refused: a terminal run
// never moves back, a finished operation is never revived, and a batch is written whole
// or not at all.
package operations
