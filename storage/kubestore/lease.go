package kubestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/claims"
	"github.com/itemops/itemops/storage/kv"
)

// The roles of the store's Leases (label itemops.io/role), the label that names the
// session a claim or member is bound to, and the annotations of a claim handed over.
const (
	roleSession         = "session"
	roleMember          = "member"
	roleClaim           = "claim"
	labelHolder         = "itemops.io/holder"
	annotationFreeFrom  = "itemops.io/free-from"
	annotationHandedBy  = "itemops.io/handed-over-by"
	sessionGenerateName = "itemops-"
)

// leases keeps the claims of a Store in coordination.k8s.io/v1 Leases of its namespace,
// for the claim policy of package storage/claims:
//
//   - A session is a Lease labelled itemops.io/role=session, named by the API server
//     (itemops- and a suffix), whose holderIdentity is Options.Identity and whose
//     leaseDurationSeconds is Options.ClaimTTL; the store renews it (renewTime) as
//     soon as it creates it, then every third of that.
//   - A claim is a Lease named like the run's object (objectName: it holds a dot, which
//     no session or member name does), labelled role=claim and itemops.io/holder with
//     the session's name, which is also its holderIdentity. A claim handed over keeps
//     them, and carries the annotations itemops.io/free-from (RFC 3339) and
//     itemops.io/handed-over-by (the Identity of the store that handed it over).
//   - A member of the claim sessions is a Lease named after its session and a number,
//     labelled role=member and holder.
//
// A claim or member counts while its session is live. A session is judged by observed
// time, as client-go's leader election judges its Lease, so that no store trusts
// another's clock: a session's Lease is live until its resourceVersion has stayed the
// same, as this store reads it, for its leaseDurationSeconds by this store's clock since
// it first read that version; a session whose Lease is gone is dead. A store that first
// reads the Lease of a session that had already died thus waits one duration more. A
// version is a resourceVersion. Every update or delete of a claim or member is
// conditional on the resourceVersion read or written before, so that no write undoes
// another; only Close deletes without one, the Leases of its own session.
type leases struct {
	s        *Store
	client   coordclient.LeaseInterface
	ns       string
	identity string
	ttl      time.Duration
	timeout  time.Duration

	// obsMu guards obs: for each session's Lease, the resourceVersion last read and
	// when this store first read it.
	obsMu sync.Mutex
	obs   map[string]observation
}

type observation struct {
	version string
	since   time.Time
}

var _ claims.Backend = (*leases)(nil)

// A leaseSession is the session Lease of a store, renewed by a goroutine until stop.
type leaseSession struct {
	name     string
	lostOnce sync.Once
	lost     chan struct{} // closed once the Lease is no longer renewed
	cancel   context.CancelFunc
	renewing chan struct{} // closed when the goroutine that renews the Lease returns
}

func (ss *leaseSession) ID() string { return ss.name }

func (ss *leaseSession) Lost() bool {
	select {
	case <-ss.lost:
		return true
	default:
		return false
	}
}

func (ss *leaseSession) lose() { ss.lostOnce.Do(func() { close(ss.lost) }) }

// stop stops renewing the Lease and waits for the goroutine that renews it.
func (ss *leaseSession) stop() {
	ss.cancel()
	<-ss.renewing
	ss.lose()
}

func (l *leases) Ready(ctx context.Context) error {
	if l.s.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

func (l *leases) Timeout() time.Duration { return l.timeout }

func (l *leases) Key(o operations.Owner) string {
	return objectName(kv.Partition{Kind: o.Kind, Name: o.Name})
}

// Session returns the store's live session, creating its Lease when there is none or
// the last one was lost. It renews a Lease it creates at once, so that a store whose
// rights do not allow renewals fails here, with the API server's error, rather than
// losing each of its sessions, unseen, a duration later; the Lease of a session whose
// renewal failed is deleted, best effort.
func (l *leases) Session(ctx context.Context) (claims.Session, error) {
	s := l.s
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if err := l.Ready(ctx); err != nil {
		return nil, err
	}
	if s.sess != nil && !s.sess.Lost() {
		return s.sess, nil
	}
	if s.sess != nil {
		s.sess.stop()
		s.sess = nil
	}
	dur := int32(l.ttl / time.Second)
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{GenerateName: sessionGenerateName, Labels: map[string]string{labelRole: roleSession}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.identity, LeaseDurationSeconds: &dur,
			AcquireTime: &now, RenewTime: &now},
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	created, err := l.client.Create(rctx, lease, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubestore: create the session Lease in %s: %w", l.ns, err)
	}
	created.Spec.RenewTime = ptr(metav1.NewMicroTime(time.Now()))
	renewed, err := l.client.Update(rctx, created, metav1.UpdateOptions{})
	if err != nil {
		_ = l.client.Delete(rctx, created.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &created.ResourceVersion}})
		return nil, fmt.Errorf("kubestore: renew the session Lease %s/%s: %w", l.ns, created.Name, err)
	}
	created = renewed
	kctx, stop := context.WithCancel(context.Background())
	ss := &leaseSession{name: created.Name, lost: make(chan struct{}), cancel: stop, renewing: make(chan struct{})}
	go l.renew(kctx, ss, created)
	s.sess = ss
	return ss, nil
}

// renew renews the session's Lease every third of its duration, until ctx ends. The
// session is lost when a renewal finds the Lease changed by another or gone (another
// store judged it dead and took it away), when the API server forbids it (the rights
// changed; the next Session fails then), or when no renewal succeeded for a whole
// duration, after which the other stores judge it dead.
//
// A renewal whose outcome is unknown (see refused) may have been applied, and then the
// next one, made at the version before it, meets a Conflict: renew reads the Lease back,
// and when it holds the renewTime of such a renewal, the change was this store's own,
// and the session goes on from the Lease read.
func (l *leases) renew(ctx context.Context, ss *leaseSession, lease *coordinationv1.Lease) {
	defer close(ss.renewing)
	defer ss.lose()
	last := time.Now()
	// unknown holds the renewTimes of the renewals since the last one applied whose
	// outcome is unknown: a few at most, as the session is lost a duration after the
	// last renewal applied.
	var unknown []time.Time
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		at := now.Truncate(time.Microsecond) // the API server keeps a renewTime to the microsecond
		got, err := l.renewAt(ctx, lease, at)
		if apierrors.IsConflict(err) && len(unknown) > 0 {
			cur, rerr := l.ownRenewal(ctx, lease.Name, unknown)
			switch {
			case cur != nil:
				lease, unknown = cur, nil
				got, err = l.renewAt(ctx, lease, at)
			case apierrors.IsConflict(rerr), apierrors.IsNotFound(rerr):
				err = rerr
			case time.Since(last) >= l.ttl:
				return
			default:
				continue // the read failed: the next tick reads again
			}
		}
		switch {
		case err == nil:
			lease, last, unknown = got, now, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err), time.Since(last) >= l.ttl:
			return
		case !refused(err):
			unknown = append(unknown, at)
		}
	}
}

// renewAt writes the renewTime at into the session's Lease at its version.
func (l *leases) renewAt(ctx context.Context, lease *coordinationv1.Lease, at time.Time) (*coordinationv1.Lease, error) {
	lease.Spec.RenewTime = ptr(metav1.NewMicroTime(at))
	ctx, cancel := context.WithTimeout(ctx, min(l.timeout, l.ttl/3))
	defer cancel()
	return l.client.Update(ctx, lease, metav1.UpdateOptions{})
}

// ownRenewal reads the session's Lease name back after a renewal met a Conflict, and
// returns it when its last change was one of this store's renewals whose outcome was
// unknown: it is this store's session Lease and holds one of their renewTimes. It
// returns nil and a Conflict when another changed the Lease, and the Get's error when
// the read fails (a NotFound when the Lease is gone).
func (l *leases) ownRenewal(ctx context.Context, name string, unknown []time.Time) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, min(l.timeout, l.ttl/3))
	defer cancel()
	cur, err := l.client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	own := cur.Labels[labelRole] == roleSession && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == l.identity &&
		cur.Spec.RenewTime != nil && slices.ContainsFunc(unknown, cur.Spec.RenewTime.Time.Truncate(time.Microsecond).Equal)
	if !own {
		return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), name, errors.New("another changed the session Lease"))
	}
	return cur, nil
}

func ptr[T any](v T) *T { return &v }

// live reports whether the session whose Lease is lease (nil when it is gone) is live,
// judged by observed time (see leases). now is this store's clock.
func (l *leases) live(name string, lease *coordinationv1.Lease, now time.Time) bool {
	if own := l.own(); own != nil && own.name == name {
		return !own.Lost()
	}
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	if lease == nil {
		delete(l.obs, name)
		return false
	}
	o, ok := l.obs[name]
	if !ok || o.version != lease.ResourceVersion {
		o = observation{version: lease.ResourceVersion, since: now}
		l.obs[name] = o
	}
	d := l.ttl
	if lease.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	return now.Sub(o.since) < d
}

// own returns the store's session, or nil.
func (l *leases) own() *leaseSession {
	l.s.sessMu.Lock()
	defer l.s.sessMu.Unlock()
	return l.s.sess
}

// holderLive reads the Lease of the session name and reports whether it is live.
func (l *leases) holderLive(ctx context.Context, name string) (bool, error) {
	if own := l.own(); own != nil && own.name == name {
		return !own.Lost(), nil
	}
	lease, err := l.client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return false, err
	case lease.Labels[labelRole] != roleSession:
		lease = nil // not a session of a store: no claim is bound to it
	}
	return l.live(name, lease, time.Now()), nil
}

// claimLease returns the Lease of a claim under key held by ss, at version (none when
// it is ""), handed over from free on when handOver is set.
func (l *leases) claimLease(key, version string, ss claims.Session, handOver bool, free time.Time) *coordinationv1.Lease {
	holder := ss.ID()
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: key, ResourceVersion: version,
			Labels: map[string]string{labelRole: roleClaim, labelHolder: holder}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now},
	}
	if handOver {
		lease.Annotations = map[string]string{
			annotationFreeFrom: free.UTC().Format(time.RFC3339Nano),
			annotationHandedBy: l.identity,
		}
	}
	return lease
}

// claimOf is the claim that lease holds, or an error naming the Lease when it is not
// one the store wrote.
func (l *leases) claimOf(lease *coordinationv1.Lease) (claims.Claim, error) {
	holder := lease.Labels[labelHolder]
	if lease.Labels[labelRole] != roleClaim || holder == "" {
		return claims.Claim{}, fmt.Errorf("kubestore: Lease %s/%s is not a claim of the store (labels %v): %w", l.ns, lease.Name, lease.Labels, operations.ErrCorrupt)
	}
	c := claims.Claim{Key: lease.Name, Holder: holder, Version: lease.ResourceVersion}
	if v, ok := lease.Annotations[annotationFreeFrom]; ok {
		free, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return claims.Claim{}, fmt.Errorf("kubestore: Lease %s/%s: annotation %s %q: %w", l.ns, lease.Name, annotationFreeFrom, v, operations.ErrCorrupt)
		}
		c.HandedOver, c.Free = true, free
	}
	return c, nil
}

// Claim creates the claim's Lease, or, when ifVersion is set, replaces it at that
// version. A Lease that exists and whose session is dead is replaced at its version, as
// if it were absent. It waits at most Options.RequestTimeout, whether ctx ends or not.
func (l *leases) Claim(ctx context.Context, key string, ss claims.Session, ifVersion string) (string, *claims.Claim, error) {
	if ss.Lost() {
		return "", nil, claims.ErrSessionLost
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	if ifVersion != "" {
		return l.replace(ctx, key, ifVersion, ss)
	}
	created, err := l.client.Create(ctx, l.claimLease(key, "", ss, false, time.Time{}), metav1.CreateOptions{})
	switch {
	case err == nil:
		return created.ResourceVersion, nil, nil
	case !apierrors.IsAlreadyExists(err):
		return "", nil, fmt.Errorf("kubestore: create the claim Lease %s/%s: %w", l.ns, key, err)
	}
	cur, err := l.client.Get(ctx, key, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil, nil // another store held it a moment ago
	case err != nil:
		return "", nil, fmt.Errorf("kubestore: get the claim Lease %s/%s: %w", l.ns, key, err)
	}
	c, err := l.claimOf(cur)
	if err != nil {
		return "", nil, err
	}
	if c.Holder == ss.ID() {
		// A claim of this session, which the policy adopts: unless the session's Lease
		// is gone (another store judged it dead) before its renewal noticed.
		if _, err := l.client.Get(ctx, ss.ID(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			ss.(*leaseSession).lose()
			return "", nil, claims.ErrSessionLost
		}
		return "", &c, nil
	}
	live, err := l.holderLive(ctx, c.Holder)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("kubestore: get the session Lease %s/%s: %w", l.ns, c.Holder, err)
	case live:
		return "", &c, nil
	}
	return l.replace(ctx, key, c.Version, ss) // its session is dead: the run is free
}

// replace writes the claim under key for ss if its Lease is at version. When the Lease
// is not at version, it returns the claim it holds now, read back: client-go sends an
// update again on its own after some answers (a 5xx status with Retry-After), so the
// Conflict may follow this very write, applied, and then the claim read is ss's own.
func (l *leases) replace(ctx context.Context, key, version string, ss claims.Session) (string, *claims.Claim, error) {
	got, err := l.client.Update(ctx, l.claimLease(key, version, ss, false, time.Time{}), metav1.UpdateOptions{})
	switch {
	case err == nil:
		return got.ResourceVersion, nil, nil
	case apierrors.IsNotFound(err):
		return "", nil, nil
	case !apierrors.IsConflict(err):
		return "", nil, fmt.Errorf("kubestore: update the claim Lease %s/%s: %w", l.ns, key, err)
	}
	cur, err := l.client.Get(ctx, key, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("kubestore: get the claim Lease %s/%s: %w", l.ns, key, err)
	}
	c, err := l.claimOf(cur)
	if err != nil {
		return "", nil, err
	}
	return "", &c, nil
}

// Abandon deletes the claim's Lease if ss holds it, waiting at most
// Options.RequestTimeout.
func (l *leases) Abandon(key string, ss claims.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	cur, err := l.client.Get(ctx, key, metav1.GetOptions{})
	if err != nil || cur.Labels[labelHolder] != ss.ID() {
		return
	}
	_ = l.client.Delete(ctx, key, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
}

// applyWorkers bounds the requests that Apply has under way at once.
const applyWorkers = 16

// Apply deletes each Lease, or hands its claim over, with a precondition on its
// resourceVersion: one request each, up to applyWorkers at once. A request whose answer
// is lost may have been applied all the same: its change reports no version, as a
// change not made does (see claims.Backend.Apply).
func (l *leases) Apply(ctx context.Context, changes []claims.Change) []string {
	vers := make([]string, len(changes))
	var wg sync.WaitGroup
	slots := make(chan struct{}, applyWorkers)
	for i, ch := range changes {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if !ch.HandOver {
				_ = l.client.Delete(ctx, ch.Key, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &ch.Version}})
				return
			}
			got, err := l.client.Update(ctx, l.claimLease(ch.Key, ch.Version, ch.Session, true, ch.Free), metav1.UpdateOptions{})
			if err == nil {
				vers[i] = got.ResourceVersion
			}
		}()
	}
	wg.Wait()
	return vers
}

// Join creates the member Lease of a claim session: the session's name, a dot-free
// "-m" and seq.
func (l *leases) Join(ctx context.Context, ss claims.Session, seq int64) (string, string, error) {
	holder := ss.ID()
	name := holder + "-m" + strconv.FormatInt(seq, 10)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelRole: roleMember, labelHolder: holder}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	created, err := l.client.Create(ctx, lease, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// No one else makes a Lease of this name: an earlier Join of the same session and
		// number made it, though its answer was lost. It is this member.
		cur, gerr := l.client.Get(ctx, name, metav1.GetOptions{})
		if gerr == nil && cur.Labels[labelRole] == roleMember && cur.Labels[labelHolder] == holder {
			return name, cur.ResourceVersion, nil
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("kubestore: create the member Lease %s/%s: %w", l.ns, name, err)
	}
	return name, created.ResourceVersion, nil
}

// census is what one LIST of the store's Leases holds: the live claims and members.
type census struct {
	claims  []claims.Claim
	members []string
	version string
}

// read LISTs the store's Leases at once and judges their sessions. The Leases of dead
// sessions, and the claims and members bound to them, are deleted (each on the
// condition of its resourceVersion), so that a replica that died leaves nothing behind
// for long; a failed delete is left for the next read.
func (l *leases) read(ctx context.Context) (census, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	list, err := l.client.List(ctx, metav1.ListOptions{LabelSelector: labelRole})
	if err != nil {
		return census{}, fmt.Errorf("kubestore: list the Leases in %s: %w", l.ns, err)
	}
	now := time.Now()
	sessions := make(map[string]*coordinationv1.Lease)
	for i := range list.Items {
		if lease := &list.Items[i]; lease.Labels[labelRole] == roleSession {
			sessions[lease.Name] = lease
		}
	}
	live := make(map[string]bool)
	var dead []*coordinationv1.Lease
	for name, lease := range sessions {
		if live[name] = l.live(name, lease, now); !live[name] {
			dead = append(dead, lease)
		}
	}
	l.forgetAbsent(sessions)
	c := census{version: list.ResourceVersion}
	for i := range list.Items {
		lease := &list.Items[i]
		role, holder := lease.Labels[labelRole], lease.Labels[labelHolder]
		if role != roleClaim && role != roleMember {
			continue
		}
		if !live[holder] && !l.liveOwn(holder) {
			dead = append(dead, lease)
			continue
		}
		if role == roleMember {
			c.members = append(c.members, lease.Name)
			continue
		}
		cl, err := l.claimOf(lease)
		if err != nil {
			return census{}, err
		}
		c.claims = append(c.claims, cl)
	}
	for _, lease := range dead {
		_ = l.client.Delete(ctx, lease.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &lease.ResourceVersion}})
	}
	return c, nil
}

// liveOwn reports whether name is the store's own session, and live (its Lease may be
// newer than a list that did not see it yet).
func (l *leases) liveOwn(name string) bool {
	own := l.own()
	return own != nil && own.name == name && !own.Lost()
}

// forgetAbsent drops the observations of the sessions whose Leases are gone.
func (l *leases) forgetAbsent(sessions map[string]*coordinationv1.Lease) {
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	for name := range l.obs {
		if sessions[name] == nil {
			delete(l.obs, name)
		}
	}
}

func (l *leases) ListClaims(ctx context.Context) ([]claims.Claim, error) {
	c, err := l.read(ctx)
	return c.claims, err
}

func (l *leases) Census(ctx context.Context) (claims.Census, error) {
	c, err := l.read(ctx)
	return claims.Census{Claims: int64(len(c.claims)), Members: c.members, From: c.version}, err
}

// WatchMembers watches the member Leases from the resourceVersion from on and calls
// joined for each one added. It returns nil when ctx ends, or when the API server ends
// the watch as it does now and then (it closes watches after a while, or the version is
// too old), and the API server's error otherwise (Forbidden without watch on Leases).
func (l *leases) WatchMembers(ctx context.Context, from string, joined func()) error {
	w, err := l.client.Watch(ctx, metav1.ListOptions{LabelSelector: labelRole + "=" + roleMember, ResourceVersion: from})
	if err != nil {
		// client-go does not decode the body of a refused watch: its error says
		// "unknown", so the reason (Forbidden) goes first.
		if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
			return fmt.Errorf("kubestore: watch the member Leases in %s: %s: %w", l.ns, reason, err)
		}
		return fmt.Errorf("kubestore: watch the member Leases in %s: %w", l.ns, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok:
				return nil
			case ev.Type == watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return nil
				}
				return fmt.Errorf("kubestore: watch the member Leases in %s: %w", l.ns, err)
			case ev.Type == watch.Added:
				joined()
			}
		}
	}
}

// EndOthers ends the session of every other store of the namespace: it lists the
// session Leases and, for each that is not this store's own, deletes the Lease, then
// every claim and member Lease bound to it (one deletecollection), as Close deletes the
// store's own. Its claims stop counting as soon as its Lease is gone, even if a delete
// of its claims fails: a claim whose session's Lease is gone is dead (see Claim). A
// store whose Lease is deleted finds it gone at its next renewal and loses its session
// (see renew). A session counts as ended when this call deleted its Lease. Each request
// waits at most Options.RequestTimeout, and none once ctx has ended.
func (l *leases) EndOthers(ctx context.Context) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	list, err := l.client.List(rctx, metav1.ListOptions{LabelSelector: labelRole + "=" + roleSession})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("kubestore: list the session Leases in %s: %w", l.ns, err)
	}
	own := ""
	if ss := l.own(); ss != nil {
		own = ss.name
	}
	ended := 0
	var errs []error
	for _, lease := range list.Items {
		if lease.Name == own {
			continue
		}
		if err := ctx.Err(); err != nil {
			return ended, err
		}
		rctx, cancel := context.WithTimeout(ctx, l.timeout)
		err := l.client.Delete(rctx, lease.Name, metav1.DeleteOptions{})
		switch {
		case err == nil:
			ended++
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("kubestore: delete the session Lease %s/%s: %w", l.ns, lease.Name, err))
			cancel()
			continue
		}
		if err := l.client.DeleteCollection(rctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelHolder + "=" + lease.Name}); err != nil {
			errs = append(errs, fmt.Errorf("kubestore: delete the claims of session %s/%s: %w", l.ns, lease.Name, err))
		}
		cancel()
	}
	return ended, errors.Join(errs...)
}

// endSession stops renewing the store's session and deletes its Lease and every claim
// and member bound to it, waiting at most Options.RequestTimeout for each request.
func (l *leases) endSession(ss *leaseSession) error {
	ss.stop()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	err := l.client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: labelHolder + "=" + ss.name})
	if derr := l.client.Delete(ctx, ss.name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return fmt.Errorf("kubestore: close: give up the claims of session %s/%s: %w", l.ns, ss.name, err)
	}
	return nil
}
