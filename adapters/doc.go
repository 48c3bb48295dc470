// Package adapters holds the plugin side of asynchronous operations: the v1 and v2
// interfaces of backup item actions, restore item actions and volume snapshotters (after
// Velero's "Plugin Progress Monitoring", "RestoreItemAction v2" and "VolumeSnapshotter
// v2" designs), adapters that serve v1 plugins to v2 callers, the [Registry] that finds
// plugins by name and is the [operations.Resolver] of a Monitor, the matching of
// [ResourceSelector]s, and [WaitForAdditionalItems].
//
// # Model
//
// A v2 plugin may start a long-running operation when it acts on an item: a
// [BackupItemAction] returns an operation ID from Execute, a [RestoreItemAction] returns
// one in its [RestoreItemActionOutput], and a [VolumeSnapshotter]'s snapshot ID is the ID
// of the operation that makes the snapshot durable. The host records each as an
// [operations.Operation] whose Action is the plugin's Name, and a
// [github.com/itemops/itemops/operations/monitor.Monitor] asks the plugin's Progress
// about it until it ends, through the [operations.Tracker] that [Registry.Resolve]
// returns.
//
// The unsuffixed names are the v2 interfaces, the ones new plugins implement; the v1
// interfaces carry a V1 suffix ([BackupItemActionV1], [RestoreItemActionV1],
// [VolumeSnapshotterV1]) and the functions that serve them as v2 end in FromV1. Items are
// apimachinery [runtime.Unstructured] values, and the backup or restore object the
// actions receive is a type parameter (B for backups, R for restores), so a Velero fork
// passes its own *Backup and *Restore and an operator its own resource types. Items the
// plugins name (additional items, post-operation items) are
// [operations.ResourceIdentifier]s, the type the operation records use.
//
// Every v2 method that may call into a plugin takes a context first; Name does not, as
// the host answers it from the registration. v1 methods take no context, as in Velero.
//
// # Adapters
//
// [BackupItemActionFromV1], [RestoreItemActionFromV1] and [VolumeSnapshotterFromV1] wrap
// a v1 plugin: Execute and the other v1 methods are called through; Progress returns an
// error wrapping [operations.ErrAsyncOperationsNotSupported] (a v1 plugin has no
// operations), Cancel returns nil, AreAdditionalItemsReady returns true, and Execute
// returns no operation ID and no post-operation items. Each method first returns
// ctx.Err() if ctx is done. [IsV1] tells adapted plugins apart.
//
// There is no adapter from v2 to v1: a v2 plugin's operations would have no caller to
// report progress to, and a v1 host would take a finished Execute for a finished item
// while its operation still ran. Hosts are written against v2 and serve v1 plugins
// through the adapters.
//
// # Registry
//
// A [Registry] holds plugins by name, v1 or v2; for a name that has both, the native v2
// plugin is used. [Registry.BackupItemActionsFor] and [Registry.RestoreItemActionsFor]
// list the actions that apply to an item, in registration order, asking each action's
// AppliesTo once and keeping its selector. [Registry.Resolve] returns a Tracker that
// serves an operation from the plugin of its owner's kind; because v2 actions take the
// backup or restore object with every call and an operation names only its owner, the
// registry is built with a [Lookup] per kind that fetches that object.
//
// # Selectors
//
// [ResourceSelector] has the fields of Velero's and [NewMatcher] applies Velero's rules
// for which actions act on which items: included and excluded resources and namespaces
// with "*", cluster-scoped items taken only by selectors of every namespace, and a label
// selector. See ResourceSelector for the rules and the few places where they differ from
// Velero's (there is no discovery here).
//
// # Caveats
//
//   - Panics: the adapters and the Registry do not recover panics in the plugins they
//     call, as no code of this library recovers its callers' bugs. The
//     [github.com/itemops/itemops/operations/monitor.Monitor], which calls trackers on
//     its own goroutines, turns a panic in Progress or Cancel into the failure of that
//     one operation; a host calling plugins directly (Execute, AppliesTo,
//     WaitForAdditionalItems) recovers where it chooses.
//   - A v1 plugin has no context: a call in progress runs to its end even if ctx ends.
//   - A Registry keeps the selector an action's AppliesTo returned for as long as that
//     action is the one in use under its name, as Velero resolves selectors once per
//     backup or restore; an action whose selector changes belongs in a new Registry.
//   - Resource names in selectors are matched without discovery: see
//     [ResourceSelector] for bare names, groups, and short names.
package adapters
