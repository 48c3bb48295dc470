// Package claims is the claim policy of the stores whose replicas share runs, written
// once over a small [Backend] that each such store implements: storage/etcdstore keeps
// its claims in etcd keys bound to a lease, storage/kubestore in coordination.k8s.io
// Leases. It is public so that those drivers, which are Go modules of their own, and a
// driver of one's own for another database, share one implementation of the policy.
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
// lease that expires, a Lease whose renewals others stop seeing.
//
// A driver builds one Claimer over its Backend with [New] and returns its methods as its
// store's ClaimRun, KeepClaims and TakeOverClaims; storetest.RunClaims and
// storetest.RunReplicas check the result. The package follows the root module's
// version: a driver in a module of its own requires the root at the version whose
// Backend it implements.
package claims
