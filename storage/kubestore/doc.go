// Package kubestore provides an operations.Store kept in a Kubernetes API server, for an
// operator that keeps its runs where its resources live, with no other database. It
// runs the engine of package storage/kv ([kv.OpenPartitioned]) on the objects of two
// custom resources of the group store.itemops.io, version v1alpha1, which [CRDs] holds
// and [InstallCRDs] installs. It implements none of the store contract's rules: it
// keeps keys, and the engine keeps the rules.
//
// # Layout
//
// A store is one namespace: [Open] takes it, and every object of the store lies there.
// Each run is one ItemopsRun, whose name is made from the run's kind and name: a tag for
// the kind ("b" for Backup, "r" for Restore, "k" and the escaped kind for a kind of
// one's own), a dot, and the name with every byte other than a to y and 0 to 9 written as
// "z" and two hex digits, so that "shop/nightly" of Backup is b.shopz2fnightly. A
// name longer than 253 bytes is cut and ends with a hash of the kind and name (spec.owner
// holds both in full). Its spec names the run and is immutable; its status holds the
// run's phase (shown by kubectl get) and status.store, the run's keys: the gzip of
// every key with its version and value (data), the sequence number of the last commit,
// and which key holds the run's record. The labels itemops.io/role, itemops.io/kind and
// itemops.io/phase let one LIST select the runs of a kind and phases. The ItemopsChunk
// named "itemops" holds the store's format marker.
//
// Every commit is one write of one object, conditional on the resourceVersion that its
// read found, so writers in several processes lose nothing: a write that finds the
// object changed reads it again, checks the commit's conditions again and writes again.
// ListRuns is one LIST, read in pages of one consistent snapshot.
//
// # Limits
//
// A run's keys all live in its ItemopsRun, so a run whose object would exceed
// [Options.MaxObjectBytes] (1 MiB by default) of JSON cannot grow further: the commit
// that would make it so fails with an error wrapping kv.ErrTooLarge and writes nothing.
// Gzip makes a run of a few thousand operations fit.
//
// # Failure and cancellation
//
// Every method takes a context and ends with ctx.Err(), possibly wrapped, when ctx ends
// first. A request the API server refuses or does not answer fails the call with its
// error, wrapped; a write whose answer was lost may have been made, whole, or not at all,
// as for any one object of the API. An object edited into a shape the store does not
// write (a spec of another run, data that does not decode, a missing field) fails every
// read of it with an error wrapping operations.ErrCorrupt that names the object; nothing
// is repaired.
//
// # Concurrency
//
// A [Store] is safe for concurrent use, and several Stores, in several processes, may
// share a namespace: the engine's turns order the writes of one Store, and
// resourceVersions order those of several.
package kubestore
