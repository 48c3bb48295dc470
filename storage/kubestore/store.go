package kubestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/claims"
	"github.com/itemops/itemops/storage/kv"
)

// A Store is an [operations.Store] kept in the objects of one namespace of a Kubernetes
// API server (see the package documentation), an [operations.RunClaimer] that lets
// several Monitors, in several processes, share its runs, an [operations.ClaimKeeper]
// whose claim sessions keep a Monitor's claims from pass to pass and balance the runs
// among the replicas ([Store.KeepClaims]), and an [operations.ClaimTaker] that frees at
// once the runs of the other replicas ([Store.TakeOverClaims]). It is safe for
// concurrent use, and several Stores, in this process or others, may use the same
// namespace at once. Get one from [Open] and release its claims with [Store.Close].
//
// The methods of operations.Store are the engine's (package storage/kv), which
// documents them. Beside its errors, each fails with the API server's error, wrapped,
// when the server refuses or does not answer a request (a write may then have been
// made, whole, or not at all). A Store opened with [Options.ReadOnly] fails every write
// with an error wrapping [ErrReadOnly], before it sends a request that writes.
type Store struct {
	*kv.Store          // the engine
	b         *backend // the engine's backend, which Sweep sweeps

	// claims is the claim policy, over the Leases that leases keeps.
	claims *claims.Claimer
	leases *leases
	closed atomic.Bool
	// sessMu guards sess, the Lease that keeps this store's claims alive; nil until the
	// first claim.
	sessMu sync.Mutex
	sess   *leaseSession

	closeOnce sync.Once
	closeErr  error
}

var (
	_ operations.Store      = (*Store)(nil)
	_ operations.ClaimTaker = (*Store)(nil)
)

// Open returns the store in namespace of the API server that cfg reaches. It copies cfg,
// and sets its QPS and Burst from o where cfg leaves them 0; a nil o means the
// defaults of [Options]. A client limit that cfg sets is kept: see "Rate limits" in the
// package documentation for the limit a Monitor's pass needs. The resources of
// [InstallCRDs] must be installed.
//
// The first Open of a namespace writes the store's markers: the ItemopsRun named
// "itemops", which holds the store's identity, then the ItemopsChunk named "itemops",
// its format marker, labelled with the identity (see the package documentation,
// "Identity"); the first Open of a store made before stores had identities writes the
// former. Open fails with an error wrapping kv.ErrFormat when the namespace holds runs'
// objects but no format marker, or a marker of another format; with an error wrapping
// operations.ErrCorrupt when the format marker names an identity that the runs' marker
// does not hold (the runs were deleted since, as deleting their CRD does); with the API
// server's error, wrapped, when it refuses or does not answer; or with ctx.Err(). Then
// it has written no more than the runs' marker. The Store checks on each call that the
// markers are still those it opened (see "Identity"): a store whose markers were deleted
// or replaced fails every call with an error wrapping operations.ErrCorrupt. Once open,
// the store sweeps the namespace, as [Store.Sweep] does;
// a sweep that fails does not fail Open, and leaves what it did not delete to the next,
// unless the API server forbids it (the Role of [RBAC] grants what it needs): then Open
// fails with that error, wrapped, after it may have written the marker.
//
// With [Options.ReadOnly], Open writes nothing and does not sweep; it checks the
// markers and the format as above. A namespace without the store's markers (no format
// marker, and no run) fails it with an error wrapping kv.ErrFormat that says there is
// no store there; so does one whose store was made before stores had identities and
// has no runs' marker yet, which only a writable Open adds, with an error wrapping
// [ErrReadOnly] instead.
func Open(ctx context.Context, cfg *rest.Config, namespace string, o *Options) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("kubestore: open: nil rest.Config")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kubestore: open: namespace %q: %v", namespace, errs)
	}
	opts, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = opts.QPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = opts.Burst
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	coord, err := coordclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	b := &backend{
		dyn: dyn, meta: meta, ns: namespace, readOnly: opts.ReadOnly,
		maxObjectBytes: opts.MaxObjectBytes, inlineBytes: opts.InlineBytes, chunkBytes: opts.ChunkBytes,
		cache:  newChunkCache(opts.ChunkCacheBytes),
		owners: &owners{of: opts.OwnerReference, disc: disc.RESTClient(), meta: meta, ns: namespace, kinds: map[schema.GroupVersion][]metav1.APIResource{}},
	}
	eng, err := kv.OpenPartitioned(ctx, b)
	if opts.ReadOnly && errors.Is(err, ErrReadOnly) {
		// The engine found no store, and would have made one.
		return nil, fmt.Errorf("kubestore: open namespace %s: no store there (no ItemopsChunk %q, its format marker), and a read-only Open makes none: %w", namespace, formatName, kv.ErrFormat)
	}
	if err == nil {
		err = b.openIdentity(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("kubestore: open namespace %s: %w", namespace, err)
	}
	// The sweep is best effort: what it leaves, the next one deletes. A sweep that the
	// API server forbids would leave everything, always, so that fails Open. A
	// read-only store does not sweep.
	if !opts.ReadOnly {
		if _, err := b.sweep(ctx); apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("kubestore: open namespace %s: sweep: %w", namespace, err)
		}
	}
	s := &Store{Store: eng, b: b}
	s.leases = &leases{s: s, client: coord.Leases(namespace), ns: namespace, identity: opts.Identity,
		ttl: opts.ClaimTTL, timeout: opts.RequestTimeout, obs: make(map[string]observation)}
	s.claims = claims.New(s.leases)
	return s, nil
}

// ClaimRun claims the run of o for this store, so that one
// [github.com/itemops/itemops/operations/monitor.Monitor] at a time polls or finalizes
// it; see [operations.RunClaimer]. The claim is a coordination.k8s.io Lease in the
// store's namespace, named like the run's object, bound to the store's session: a Lease
// of the store that it renews every third of [Options.ClaimTTL] from its first claim
// until [Store.Close]. When the store's process dies, or loses the API server, for that
// long, the other stores judge its session dead by the time they see it unrenewed (by
// their own clocks, never trusting the renewTime it wrote) and take its runs; see the
// package documentation, "Claims". A claim of a run already claimed, by this store or
// another, reports ok false; so does a claim of a run another replica handed over that
// is not free yet.
//
// The policy is that of storage/etcdstore's Store.ClaimRun, shared with it: release
// gives the claim up (a DELETE on the condition of the Lease's resourceVersion, waiting
// at most [Options.RequestTimeout]); a claim whose release did not reach the API server
// stays until this store's next claim of the run adopts it, or its session ends; a
// claim of a run that a claim session of this store keeps is lent, and its release
// gives it back. ClaimRun fails with [operations.ErrInvalid] for an invalid owner, with
// [ErrClosed] after Close, with [ErrReadOnly] on a store opened with
// [Options.ReadOnly], with the API server's error, wrapped, or with ctx.Err(). Its
// requests are not cut short when ctx ends (each takes at most Options.RequestTimeout):
// a claim made for a caller that has gone is given up before ClaimRun returns
// ctx.Err().
func (s *Store) ClaimRun(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	if s.claims == nil {
		return nil, false, ErrClosed // the zero Store
	}
	if s.b.readOnly {
		return nil, false, readOnlyError("claim the run of "+o.String(), s.b.ns)
	}
	return s.claims.ClaimRun(ctx, o)
}

// KeepClaims starts a claim session for a
// [github.com/itemops/itemops/operations/monitor.Monitor] whose Run makes a pass every
// interval, which makes the Store an [operations.ClaimKeeper]; Run calls it on its own.
// The session's policy is that of storage/etcdstore's Store.KeepClaims, shared with it:
// a claim stays with the session from pass to pass; at the end of a pass the session
// gives up the claims the pass did not use and hands over those beyond its share of the
// runs (the runs divided by the members, one more for the first members by name), free
// for another an interval after its last poll of each; it watches the members (a Lease
// each, labelled itemops.io/role=member) and hands over at once when one joins; and End
// gives up everything it keeps. Each request waits at most [Options.RequestTimeout];
// what the API server does not answer, the next pass makes up for, or the session's end
// leaves to the store's. EndPass returns what kept the session from writing its member
// Lease, or listing or watching the Leases, since the last EndPass (the API server's
// errors, Forbidden among them), which the Monitor logs. After Close, the session keeps
// nothing and its ClaimRun fails with [ErrClosed]; on a store opened with
// [Options.ReadOnly], the session keeps nothing and its ClaimRun fails with an error
// wrapping [ErrReadOnly].
func (s *Store) KeepClaims(ctx context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	if s.claims == nil {
		return claims.Ended(ErrClosed) // the zero Store
	}
	if s.b.readOnly {
		return claims.Ended(readOnlyError("keep claims", s.b.ns))
	}
	return s.claims.KeepClaims(ctx, interval, wake)
}

// TakeOverClaims ends the session of every other store of the namespace, so that the
// runs they held are free for this one at once, and returns how many it ended; it makes
// the Store an [operations.ClaimTaker], which documents when to call it. It deletes the
// session Lease of each (labelled itemops.io/role=session, this store's own excepted),
// then every claim and member Lease bound to it, as Close deletes the store's own; a
// store whose Lease is deleted finds it gone at its next renewal, within a third of its
// ClaimTTL, and starts another session. Without it a store judges another's session dead
// only once it has seen its Lease unrenewed for its ClaimTTL (see the package
// documentation, "Claims"). It needs list, delete and deletecollection on Leases (the
// Role of [RBAC] grants them). It fails with [ErrClosed] after Close, with an error
// wrapping [ErrReadOnly] on a store opened with [Options.ReadOnly], with the API
// server's error, wrapped, or with ctx.Err(), having ended the sessions counted; each
// request waits at most [Options.RequestTimeout].
func (s *Store) TakeOverClaims(ctx context.Context) (ended int, err error) {
	if s.claims == nil {
		return 0, ErrClosed // the zero Store
	}
	if s.b.readOnly {
		return 0, readOnlyError("take over claims", s.b.ns)
	}
	return s.claims.TakeOverClaims(ctx)
}

// Close gives up the runs this store has claimed: it ends the claim sessions of
// [Store.KeepClaims] that their Monitors have not ended (their watches of the members
// included), stops renewing its session, and deletes the session's Lease and every
// claim and member Lease bound to it (one deletecollection). Later claims fail with [ErrClosed]; the methods of operations.Store
// go on working, as the store holds no other resource. Only the first call does
// anything; later calls return what it returned. Close waits at most
// [Options.RequestTimeout] for each request; when the API server does not answer, the
// other stores judge the session dead [Options.ClaimTTL] after they last saw it renewed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.claims.Close() // the claim sessions a Monitor did not end: their Leases go below
		s.sessMu.Lock()
		ss := s.sess
		s.sess = nil
		s.sessMu.Unlock()
		if ss != nil {
			s.closeErr = s.leases.endSession(ss)
		}
	})
	return s.closeErr
}
