package kubestore

import (
	"fmt"
	"os"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/itemops/itemops/operations"
)

// Options configures [Open]. A nil *Options means the defaults below.
type Options struct {
	// QPS and Burst set the client's rate limit where the rest.Config given to Open
	// leaves them 0 (client-go's own defaults, 5 and 10, would make a Monitor's pass over
	// a hundred runs take minutes). The defaults are 200 and 400. See "Rate limits" in
	// the package documentation for what a pass needs.
	QPS   float32
	Burst int
	// MaxObjectBytes is the largest JSON, in bytes, of an object the store writes: a
	// commit that would make a run's object larger fails with an error wrapping
	// kv.ErrTooLarge and writes nothing. The default, 1 MiB, is below etcd's default
	// request limit of 1.5 MiB. Less than 0 is an error.
	MaxObjectBytes int
	// InlineBytes is the most bytes of gzip that a run's keys may take inside the run's
	// object; a run whose keys take more keeps only its record there and the rest in
	// chunks. The default is 128 KiB; less than 0 is an error.
	InlineBytes int
	// ChunkBytes is the most bytes of keys, with their versions and values, that one
	// chunk holds before compression. The default is 512 KiB, which keeps a chunk of
	// keys that do not compress under MaxObjectBytes' default; less than 0 is an error.
	ChunkBytes int
	// ChunkCacheBytes bounds the chunks, decoded, that the Store keeps in memory so that
	// its reads and commits of a spilled run fetch only the chunks they have not seen
	// (the least recently used are dropped first). A chunk is never changed, and a
	// run's object names each chunk with the SHA-256 of its data, so a cached chunk
	// always holds the keys the run's object names: each was checked against that
	// SHA-256 and decoded in full when it entered the cache, or was written by the
	// Store. A chunk deleted or changed by hand after the Store cached it is therefore
	// found only by the reads of Stores that have not cached it. The default is 64 MiB;
	// less than 0 keeps no chunk.
	ChunkCacheBytes int
	// ClaimTTL is the leaseDurationSeconds of the Lease that keeps this store's claims
	// alive ([Store.ClaimRun]): when the store stops renewing it (its process died or
	// lost the API server), the other stores take its runs that long after they last
	// saw it renewed. It is rounded up to whole seconds. The default is 30 s; less than
	// 0 is an error.
	ClaimTTL time.Duration
	// RequestTimeout bounds each request of the store's claims, which are not cut
	// short when the caller's context ends (see [Store.ClaimRun]). The default is 10 s;
	// less than 0 is an error.
	RequestTimeout time.Duration
	// Identity names this store in its session's Lease (holderIdentity) and in the
	// runs it hands over, for people reading them; it has no other effect. Empty means
	// the host name and process ID.
	Identity string
	// OwnerReference, when set, names the object that a run belongs to (an operator's custom
	// resource, say), which owns the run's ItemopsRun, so that Kubernetes' garbage collector
	// deletes the run, and its chunks, with it. The store calls it when it creates a run's
	// object, with the run's owner as the run gives it (its UID included), and creates the
	// object with the ownerReference it returns; nil means no owner. A later change of the
	// run's UID (see operations.Store.UpdateRun) leaves the reference as it is. The owner
	// must be an object of the store's namespace, or cluster-scoped, with the reference's
	// UID, and the store GETs it to check: the store's user needs get on the owner's
	// resource, which the Role of [RBAC] does not grant (a GET it refuses fails the creating
	// call with its error, wrapped). A reference that fails the check fails the creating
	// call with an error wrapping operations.ErrInvalid, naming the owner, and writes
	// nothing. See the package documentation, "Owners". The default, nil, gives no run an
	// owner.
	OwnerReference func(run operations.Owner) *metav1.OwnerReference
	// ReadOnly opens the store for reading only, as a viewer (the itemops command's
	// inspect, check and watch) does: Open writes nothing, neither the store's markers
	// nor the sweep of what writers left (a namespace without the markers fails Open
	// with an error wrapping kv.ErrFormat), and every write of the Store fails with
	// an error wrapping [ErrReadOnly] before it sends a request that writes. Reads, [Store.Check]
	// among them, work as they do without it. A read-only store needs only get and
	// list on itemopsruns and itemopschunks: see "Rights" in the package
	// documentation, and the Role of [RBAC] for viewers. The default, false, opens the
	// store for reading and writing.
	ReadOnly bool
}

// withDefaults returns o with its zero fields set to the defaults.
func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if out.MaxObjectBytes < 0 || out.QPS < 0 || out.Burst < 0 || out.InlineBytes < 0 || out.ChunkBytes < 0 || out.ClaimTTL < 0 || out.RequestTimeout < 0 {
		return Options{}, fmt.Errorf("negative option in %+v", out)
	}
	if out.QPS == 0 {
		out.QPS = 200
	}
	if out.Burst == 0 {
		out.Burst = 400
	}
	if out.MaxObjectBytes == 0 {
		out.MaxObjectBytes = 1 << 20
	}
	if out.InlineBytes == 0 {
		out.InlineBytes = 128 << 10
	}
	if out.ChunkBytes == 0 {
		out.ChunkBytes = 512 << 10
	}
	if out.ChunkCacheBytes == 0 {
		out.ChunkCacheBytes = 64 << 20
	}
	if out.ClaimTTL == 0 {
		out.ClaimTTL = 30 * time.Second
	}
	out.ClaimTTL = (out.ClaimTTL + time.Second - 1).Truncate(time.Second)
	if out.RequestTimeout == 0 {
		out.RequestTimeout = 10 * time.Second
	}
	if out.Identity == "" {
		host, _ := os.Hostname()
		out.Identity = host + "/" + strconv.Itoa(os.Getpid())
	}
	return out, nil
}
