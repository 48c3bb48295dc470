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
// the kind ("b" for Backup, "r" for Restore, "k" and the escaped kind for a kind of one's
// own), a dot, and the name with every byte other than a to y and 0 to 9 written as "z"
// and two hex digits, so that "shop/nightly" of Backup is b.shopz2fnightly. A name longer
// than 253 bytes is cut and ends with a hash of the kind and name (spec.owner holds both
// in full). Its spec names the run and is immutable; its status holds the run's phase,
// how many of its operations are finished of how many (status.operations), and its phase
// history (status.history), which kubectl get and kubectl describe show, and
// status.store, the run's keys: the gzip of every key with its version and value (data),
// the sequence number of the last commit, which key holds the run's record, the chunks
// that hold the rest (see below), the SHA-256 of the whole status with the labels
// (sum), and the store's identity (identity, see "Identity" below). The phase,
// counts and history are written by the commits that change them, from what the engine
// tells of each commit ([kv.RunChange]), and sum covers them, so that an edit of them
// is damage. The labels itemops.io/role, itemops.io/kind and itemops.io/phase are for
// people (kubectl get -l): sum covers them too, and the store reads none before it has
// checked it against sum. The labels itemops.io/namespace and itemops.io/name name the
// run's owner, so that kubectl get itemopsruns -l itemops.io/namespace=orders,itemops.io/name=db
// finds the run of the object orders/db: a run named namespace/name (the form of
// integrations/controllerruntime's OwnerOf) carries both, a run of another name
// itemops.io/name alone, and a part that is not a valid label value (over 63 bytes, or
// other characters than letters, digits, '-', '_' and '.') gets no label. They derive
// from spec.owner, which is immutable, and sum leaves them out, so that objects written
// before them read; a run's next write adds them. One removed by hand is no damage; one
// that names another owner is. The resource has no status subresource, so that one write of
// a run's object changes its status, labels and keys together, and the store needs no
// right on a subresource. The ItemopsChunk named "itemops" holds the store's format
// marker, and the ItemopsRun named "itemops" (whose spec names no run) the store's
// identity; the other ItemopsChunks hold the keys of spilled runs (see below), labelled
// itemops.io/role=chunk and itemops.io/run, the first 40 hex digits of the SHA-256 of
// their run's object's name, which their own name carries too.
//
// # Identity
//
// A store's identity is a random name that the runs' marker (the ItemopsRun "itemops")
// holds, that the format marker of a store made by this version carries as its label
// itemops.io/store, and that every run's object names in status.store.identity. [Open]
// reads both markers: a format marker naming an identity whose runs' marker is gone,
// or holds another, fails Open with an error wrapping operations.ErrCorrupt (the runs'
// CRD was deleted and installed again, or their objects deleted, which would otherwise
// read as an empty store). Once open, every method of operations.Store, and
// [Store.Sweep], checks that the store is still the one it opened: each read of a run,
// each creation and each ListRuns GETs the format marker, which must be there with the
// UID that Open found (a marker deleted, or deleted and made again, fails the call); a
// read that finds no run, a creation, and each ListRuns (whose LIST holds it) check
// that the runs' marker is there with the store's identity; and a run's object naming
// another identity (copied from another store's namespace) is damage.
// The cost is one GET of the format marker, a few hundred bytes, per read of a run,
// per creation of a run and per ListRuns, and one GET of the runs' marker per read that
// finds no run and per creation. An identity survives a backup and restore of the
// namespace's objects; a restore that gives the format marker a new UID fails the calls
// of the Stores open at that time, and a new Open reads the store as it was.
//
// Stores written before stores had identities are opened as they are: their format
// marker names no identity (the Role grants no update of ItemopsChunks, so it stays
// so), Open makes the runs' marker with a new identity if there is none, and a run's
// object that names no identity is read as sound and names the store's from its next
// commit on. For such a store, the check at Open of a runs' CRD installed again is
// missing (a runs' marker that is gone is made again); the Stores that are open at the
// time see it.
//
// # Owners
//
// [Options.OwnerReference] names, for a run's owner (its UID included), the object the
// run belongs to (an operator's custom resource, say), and the store creates the run's
// ItemopsRun with that ownerReference, so that Kubernetes' garbage collector deletes the
// run with its owner, and the run's chunks, which the ItemopsRun owns, with it. The
// collector looks for a namespaced owner in its dependent's namespace, and takes an owner
// it does not find there, or whose UID is not the reference's, as deleted, and deletes
// the dependent. So before it creates the object, the store finds the owner's resource by
// discovery (kept, per group and version, until a kind is missing from it) and GETs the
// owner, in the store's namespace or, cluster-scoped, in the cluster: an owner that is
// not there with the reference's UID, a kind the API server does not serve or a reference
// without an apiVersion, kind, name or UID fails the creating call with an error wrapping
// operations.ErrInvalid, naming the owner, and writes nothing. The reference is set when
// the object is created and never changed by the store: a run deleted and created again
// asks again. The sum leaves ownerReferences out, since Kubernetes changes them itself
// (its collector removes them from the dependents of an owner deleted with
// propagationPolicy Orphan), and a run so orphaned reads as before. The deletion by the
// collector is Kubernetes' behaviour, which this package's tests, on an API server
// without a controller manager, do not exercise: they check the references the store
// writes and refuses. A GET of the owner that the API server refuses (Forbidden, without
// the right that "Rights" names) fails the creating call with its error, wrapped.
//
// # Commits
//
// Every commit ends with one write of the run's object, conditional on the
// resourceVersion that its read found; that write is the commit's only commit point.
// Writers in several processes therefore lose nothing: a write that finds the object
// changed reads it again, checks the commit's conditions again and writes again.
//
// The versions that the engine's conditions compare are the store's own: each commit of
// a run raises status.store.seq by one, and every key it writes carries the new number.
// A run's first commit starts from a random number below 2^62, so that a run deleted and
// created again matches no condition read from the object it had before. A
// resourceVersion, which the API leaves opaque, is never parsed or ordered: the store
// only tells whether two are equal, and sends one back as the precondition of a write.
//
// Every call that reads a run GETs its object: the store keeps no copy of the runs'
// objects (no informer), so a read sees every write that ended before it began, in any
// process.
// ListRuns is one LIST of every run's object of the namespace, read in pages of 500 of
// one consistent snapshot, whatever runs it selects: the store checks each object
// against its sum, then selects by its kind and phase. A LIST by label selector would
// leave out, with no error, a run whose labels were edited by hand; reading them all
// costs a LIST of the finished runs too: for the 10 waiting runs of a namespace that
// also holds 200 completed runs of 20 operations, about 600 kB and 145 ms
// (BenchmarkListRunsWaiting), so an operator should delete finished runs it no longer
// needs. A snapshot that the API server no longer
// holds when the next page is asked for (410 Gone) fails ListRuns with that error,
// wrapped.
//
// A Monitor's pass reads its runs from that LIST alone (operations.PassReader, which the
// engine implements on the store): ReadPass gives each LIST page's waiting runs, each
// with its operations as the page's objects hold them, and the chunks they name from the
// Store's chunk cache or fetched; only a run whose chunk a commit replaced since the LIST
// is read again, by a GET of its object. CommitPass writes a run's object with no read
// before it: the engine checks its conditions against the object as the LIST gave it,
// and the PUT is conditional on that object's resourceVersion. A PUT that finds the
// object changed (409 Conflict) reads it again and checks the conditions on what it
// finds, as every commit does, so that a run changed since the pass read it fails its
// CommitPass with operations.ErrStale and is left as it was. A pass thus costs the API
// server one GET of the format marker, the pages of the LIST, and one PUT per run whose
// operations changed (with, for a spilled run, the creation of the chunks it changes and
// the deletion of those they replace), and nothing for a run with no change:
// BenchmarkPass measures it. Since the Monitor works between the pages of a pass, a page
// whose snapshot the API server no longer holds (410 Gone) does not fail ReadPass as it
// fails ListRuns: the pass LISTs again from the start, and skips the runs it has given.
//
// A run whose keys take more than [Options.InlineBytes] of gzip spills: its object keeps
// the run's record, and the other keys go to ItemopsChunks of at most
// [Options.ChunkBytes] each, owned by the run's object, which the object names with the
// SHA-256 of each. DeleteRun deletes them once it has deleted the object (the garbage
// collector, through the ownerReference, and the sweep of the next Open delete those
// that a delete whose answer was lost leaves behind). A chunk is never
// changed: a commit creates new chunks for the keys it changes, keeps the others, writes
// the run's object naming them, and only then deletes the chunks it replaced. A commit
// whose write of the run's object the API server refuses (a status it sends only for a
// request it did not apply: 400, 403, 404, 409, 413, 422, 429 and the like) has changed
// nothing that a reader sees, and deletes the chunks it created; after a 409, which may
// answer client-go's own second sending of a write whose first was applied, it reads
// the object again and keeps the chunks the object names. A write whose outcome
// is unknown (a transport error, a context that ended, an answer cut short, 500, 504)
// may have been applied, and its object may name the chunks: the commit fails with its
// error, deletes nothing, and leaves the chunks to the sweep, which deletes them only
// if no run's object names them. A reader that finds a chunk gone, replaced by a later
// commit, reads the run's object again. The first commit of a run that spills first
// creates the run's object empty (its status holds only a sequence number and the
// store's identity), labelled itemops.io/role=pending, to own the chunks; readers take
// such a run as absent. What makes an object pending is its data, not its label: a
// run's object labelled pending by hand is damage.
//
// A writer that dies between creating its chunks and writing the run's object leaves
// them behind, named by no run's object, and so do a write of the run's object whose
// outcome is unknown and was not applied, and a refused one whose chunks' deletion
// fails too. [Store.Sweep] deletes them, and the pending objects of creations that
// never came; [Open] sweeps, so that a process that dies and starts again deletes what
// it left. The sweep reads every chunk and every run's object of the namespace, and
// never deletes a chunk that a run's object names, whatever the chunk's labels or
// ownerReferences say, nor any chunk that a run's object that does not decode might
// name. It tells the other chunks that no commit can name any more by the sequence
// numbers of the chunks and of the run's object, not by a clock, so a commit in flight
// in another process loses nothing to it; a pending object is deleted by its age, and
// deleting one too early costs the creation in flight a retry.
//
// A Store keeps the chunks it read or wrote, decoded, in a cache of
// [Options.ChunkCacheBytes], keyed by each chunk's name and SHA-256, so that a read or
// commit of a spilled run fetches only the chunks it has not seen. Each cached chunk was
// checked against the SHA-256 that a run's object names it with when it entered the
// cache; a chunk damaged by hand after that is found by the Stores that have not cached
// it, while the one that has reads the keys the run's object names.
//
// # Limits
//
// A commit that would make a run's object exceed [Options.MaxObjectBytes] (1 MiB by
// default) of JSON fails with an error wrapping kv.ErrTooLarge and writes nothing; the
// record of a run alone never comes near it, since the records are bounded (see
// operations.MaxTextBytes). A cluster whose etcd takes smaller requests than its default
// of 1.5 MiB needs a smaller MaxObjectBytes, and a smaller [Options.ChunkBytes] with it:
// a chunk is not measured against MaxObjectBytes, and one of keys that do not compress
// takes about four thirds of ChunkBytes as JSON, its data being base64. A write that the
// API server refuses as too large fails its commit, which then leaves nothing visible.
//
// The store reports no limit to the engine, which therefore never stages a batch here
// (see package storage/kv, "Batches larger than one commit"): the write of the run's
// object makes a commit of any size atomic, and a large batch costs the creation of its
// chunks and that one write. The run's object names each of its chunks with the chunk's
// first and last key, so a run with enough chunks would make it exceed MaxObjectBytes,
// and its commit fail as above.
//
// Damage is reported, never repaired (see "Failure and cancellation" below): the store
// deletes no chunk that a run's object names, or that one that does not decode might
// name. [Store.Check] reads the whole namespace, each object on its own, and reports
// every object that is not as the store writes it, changing nothing; itemops check
// calls it. There is no salvage of a namespace: itemops salvage reads boltstore files
// only.
//
// # Rate limits
//
// Beside its writes, a Monitor's pass over this store makes a few requests: a LIST of
// the waiting runs (a page per 500) and one of the finalizing runs, a GET of the format
// marker before each, and, when the Monitor keeps its claims (its Run, or RunOnce given
// monitor.WithKeptClaims), a LIST of the claim Leases and the renewals of its session's
// Lease. It writes each run whose poll changed something with one PUT (and, for a run
// whose keys spill into chunks, the writes of the chunks it replaces). Behind a client
// limit of q requests a second with a burst of b, a pass that writes w runs takes at
// least (w + 5 − b) / q seconds: under controller-runtime v0.19's default limit of 20
// and 30, a pass that writes 1,000 runs takes about 49 s, five times the Monitor's
// default interval (docs/BENCHMARKS.md, "A pass that reads once").
//
// [Open] keeps the limit of the rest.Config it is given, and sets [Options.QPS] and
// [Options.Burst] (200 and 400 by default) only where the config leaves them 0. An
// operator with a low client limit and hundreds of waiting runs has two ways out:
//
//   - give Open a config with no client limit (QPS −1, as the GetConfig of newer
//     controller-runtime releases gives; v0.25's does), and leave the sharing of the
//     API server to its priority and fairness, as examples/operator does (its
//     store.go);
//   - give the Monitor monitor.WithProgressWriteInterval (a minute, say), so that a run
//     whose operations only progressed is written once per interval, while phase
//     changes, failures and cancels are written at once: a pass over 1,000 such runs
//     then writes about a sixth of them and fits in the default interval under 20 and
//     30.
//
// # Rights
//
// A store needs the rights of the Role itemops-kubestore of [RBAC] (rbac/role.yaml), in
// its namespace, and no right outside it: get, list, create, update and delete on
// itemopsruns; get, list, create and delete on itemopschunks (the list is the sweep's:
// Open fails on a Forbidden sweep); and get, list, watch, create, update, delete and
// deletecollection on the Leases of coordination.k8s.io, for the claims on runs (a claim
// creates Leases, reads that of a run another replica held, and rewrites it when that
// replica is dead or handed the run over; the store renews its session's Lease, the
// first time as soon as it creates it, so that a claim fails at once without that right;
// Close deletes them; a claim session lists and watches them). Bind it to the operator's
// service account in the store's namespace. A request the rights do not allow fails its
// call with the API server's Forbidden error, wrapped (apierrors.IsForbidden sees it).
// The requests made after a call's outcome is settled, or by the store on its own, fail
// no call: the deletes of the chunks that a commit replaced, which come after its commit
// point, and the claims' requests that neither [Store.ClaimRun] nor [Store.Close] makes
// (the releases, the later renewals of the store's session, and a claim session's own,
// see [Store.KeepClaims]). Each right they need is needed by a call too, which fails
// without it, except three. Without list or watch on Leases, a claim session cannot
// count the replicas or watch them join, so it hands no run over; the end of its
// Monitor's pass (operations.ClaimSession's EndPass) returns the Forbidden error, which
// the Monitor logs as a warning each pass. Without delete on itemopschunks, the replaced
// chunks stay until their run is deleted, which shows only in its effect.
//
// A store opened with [Options.ReadOnly] needs only get and list on itemopsruns and
// itemopschunks: the Role itemops-kubestore-viewer of [RBAC] (rbac/viewer-role.yaml)
// grants them, for whoever only looks at the runs (see "Reading only" below).
//
// A store with [Options.OwnerReference] also needs get on the owners' resource (the
// operator's own custom resource, in the store's namespace, or cluster-wide for a
// cluster-scoped one), which the shipped Role cannot know: grant it beside the Role.
// Discovery, which finds that resource, is open to every authenticated user by
// Kubernetes' default ClusterRole system:discovery. An owner reference with
// blockOwnerDeletion set needs, where the API server runs the admission plugin
// OwnerReferencesPermissionEnforcement, update on the owner's finalizers subresource
// too.
//
// # Reading only
//
// A Store opened with [Options.ReadOnly] is for looking at a namespace without changing
// it, as the itemops command's inspect, check, watch and serve do. Its Open writes
// nothing: not the markers (a namespace without them fails Open with an error wrapping
// kv.ErrFormat, and stays as it was), and no sweep, so that what writers left half done
// stays for [Store.Check] to report and for a writable store's sweep to delete. Every
// write fails with an error wrapping [ErrReadOnly] before it sends a request that
// writes: the commits of the engine (creating, changing or deleting a run or its
// operations, a Monitor's pass) where they would write, after the reads the engine
// plans them on (so that a change of a run that is not there still fails with
// operations.ErrNotFound), and [Store.Sweep] and the claims ([Store.ClaimRun],
// [Store.KeepClaims], [Store.TakeOverClaims]) before any request. The reads, [Store.Check] and the pass of a Monitor's
// [operations.PassReader] included, read as they do on any Store, with the same
// requests: GETs of the format marker, of the runs' marker, of runs' objects and of
// chunks, the LIST of the runs' objects, and Check's LIST of the chunks' metadata. A
// read-only Store needs no right but get and list on the store's two resources (see
// "Rights"), and [Store.Close] makes no request.
//
// # Installing and upgrading
//
// The CustomResourceDefinitions are cluster-wide, and installing them is an
// administrator's act, kept out of the store's Role: with [InstallCRDs], as a user
// bound to the ClusterRole itemops-kubestore-install of [RBAC]
// (rbac/install-clusterrole.yaml), or with one's own tools from [CRDs]. InstallCRDs
// creates a definition that is absent and changes none that is there: one that is not
// this module's, edited by hand or installed by another version, fails it with
// [ErrForeignCRD], naming the definition.
//
// An upgrade of this module that changes the definitions is therefore an
// administrator's too: apply the new version's CRDs (kubectl apply -f), then roll out
// the operators built with it. InstallCRDs of the new version then finds the definitions
// its own, and that of the old one refuses them, so that an operator left behind says
// so when it installs. A later version's definition must accept every object an
// earlier one wrote: it may add fields to a version, and anything else comes as a new
// version beside v1alpha1. The definition of ItemopsRun gained status.store.identity
// so (see "Identity"); an operator of an earlier version that meets a run's object
// holding it keeps it, and sums it with the rest of the status.
//
// # Failure and cancellation
//
// Every method takes a context and ends with ctx.Err(), possibly wrapped, when ctx ends
// first. A request the API server refuses or does not answer fails the call with its
// error, wrapped; a write whose answer was lost may have been made, whole, or not at all,
// as for any one object of the API, and a later read tells which. An object edited into
// a shape the store does not write (data that does not decode, a missing field or
// chunk, a phase, count, history, identity or label that does not match sum, a pending
// label on a run's object) fails every read of it, and so every write to its run, and
// every ListRuns of the namespace, whatever it selects, with an error wrapping
// operations.ErrCorrupt that names the object; nothing is repaired, and a sweep deletes
// nothing that the object might name. The API server itself refuses an edit of a spec,
// and drops fields that the resources' schemas do not know. A run's object deleted by
// hand reads as a run deleted (there is nothing left to tell it from one), and its
// chunks go with the next sweep. A store whose markers were deleted or replaced fails
// every call (see "Identity").
//
// # Concurrency
//
// A [Store] is safe for concurrent use, and several Stores, in several processes, may
// share a namespace: the engine's turns order the writes of one Store, and
// resourceVersions order those of several.
//
// # Claims
//
// The replicas of an operator that share a namespace divide its runs among their
// Monitors through the Store's claims ([Store.ClaimRun], [Store.KeepClaims]), on
// coordination.k8s.io/v1 Leases in the namespace, with the policy that
// storage/etcdstore's claims follow (one implementation serves both): one Monitor polls
// a run at a time, the Run of a Monitor keeps its claims from pass to pass, and the
// replicas share the runs evenly, handing over the surplus when one joins. The Leases
// are labelled itemops.io/role:
//
//   - session: one per Store from its first claim until [Store.Close], named by the API
//     server ("itemops-" and a suffix), whose holderIdentity is [Options.Identity] and
//     whose leaseDurationSeconds is [Options.ClaimTTL]. The store renews it (a PUT on
//     its resourceVersion that sets renewTime) as soon as it creates it, then every
//     third of that.
//   - claim: one per claimed run, named like the run's ItemopsRun, whose holderIdentity
//     and label itemops.io/holder name the session that holds it. A run handed over to
//     another replica keeps its Lease, with the annotations itemops.io/free-from (from
//     when another may take it) and itemops.io/handed-over-by (the Identity of the store
//     that handed it over).
//   - member: one per claim session (the Run of a Monitor, or the RunOnce passes of a
//     Monitor given monitor.WithKeptClaims until its Close), named after its session,
//     which the replicas count and watch to compute their shares.
//
// A claim or member counts while its session is live. Liveness is judged by observed
// time, as client-go's leader election judges its Lease, so that no replica trusts the
// clock of another: a session is live until its Lease's resourceVersion has stayed the
// same for leaseDurationSeconds by the clock of the replica that looks, counted from
// when that replica first read that resourceVersion; a session whose Lease is gone is
// dead. No store judges a session by its renewTime, which is for people; a store reads
// back only its own, after a renewal whose answer was lost, to tell whether that
// renewal was applied. A replica
// that stops (its Monitor's Run returns, or Close) gives its claims up at once. One that
// dies, or loses the API server, stops renewing: it counts its own session lost once no
// renewal succeeded for a whole ClaimTTL, and the others take its runs once they have
// seen its Lease unrenewed for a ClaimTTL (one that had never read its Lease before
// waits a ClaimTTL from its first read). They then delete the dead session's Lease, and
// its claims and members, each on the condition of the resourceVersion they judged, so
// that the namespace keeps nothing of a dead replica for long. A claim's hand-over time
// (free-from) is the one place where clocks are compared: the replicas' clocks must agree
// to well within the Monitor's interval, as for storage/etcdstore. A session Lease
// deleted by hand is noticed at the store's next renewal; until then, its new claims are
// bound to the deleted session, and the other replicas may take them. Claims make the
// work efficient, not correct: the conditional writes of the engine keep a run from
// being advanced twice.
//
// A Monitor that knows it is the only one at work (a leader newly elected) need not
// wait a ClaimTTL for a dead leader's claims: [Store.TakeOverClaims] deletes the session
// Leases of the other stores, and the claims and members bound to them, so that every
// run is free at once. The integrations/controllerruntime Monitor does so as it starts,
// unless its replicas share the runs (its WithSharedClaims).
//
// The claims a replica keeps cost no request per run: a pass of its Monitor reads the
// claims once (one LIST of the Leases), and at its end lists them again to count the
// members; a run claimed anew costs a POST (and a GET of the Lease, and of its
// holder's session, when another holds it), and a release one DELETE. A Monitor that a
// program drives by RunOnce claims and releases each run in each pass (a POST and a
// DELETE per run) unless it is given monitor.WithKeptClaims, with which its RunOnce
// passes keep their claims as Run's do (one pass over 100 runs that no other replica
// wants: 605 requests where it made 804), until its Close.
package kubestore
