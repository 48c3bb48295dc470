// Package parity holds only tests: they run Velero's own, unpatched backup and restore
// operations controllers (its pkg/controller, at the version the module graph selects)
// and the bridge's BackupOperations and RestoreOperations side by side on the same
// objects, plugins and bucket, and require the same bucket bytes and the same statuses
// after each step. They are a package of their own because Velero's pkg/controller is
// the largest graph the bridge's tests compile.
package parity
