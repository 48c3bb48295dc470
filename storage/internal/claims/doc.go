// Package claims is the claim policy of the stores whose replicas share runs
// (storage/etcdstore, storage/kubestore), written once over a small [Backend] that each
// of them implements.
//
// A [Claimer] answers [operations.RunClaimer] and [operations.ClaimKeeper] for its store:
// one holder per run at a time; a claim kept by a Monitor's claim session from pass to
// pass; a replica's share of the runs (their number divided by the members', one more
// for the first members by name when it does not divide evenly); the hand-over of the
// claims beyond that share, free for another an interval after the last poll; the
// adoption of a claim whose release did not reach the backend; and the takeover of an
// [operations.ClaimTaker], which ends the other stores' sessions ([Backend.EndOthers]).
// storage/etcdstore's Store.ClaimRun and Store.KeepClaims describe that policy in full,
// for users.
//
// The Backend keeps claims and the members of the claim sessions bound to a [Session],
// the store's liveness: while the store renews it, they count, and once it stops (the
// process died or lost its backend), they stop counting, so that other replicas take the
// runs over. How a session is renewed and how its end is seen is the backend's: an etcd
// lease that expires, a coordination.k8s.io Lease whose renewals others stop seeing.
package claims
