package etcdstore

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/itemops/itemops/storage/kv"
)

// Defaults of [Options].
const (
	// DefaultMaxTxnOps is etcd's default --max-txn-ops.
	DefaultMaxTxnOps = 128
	// DefaultMaxRequestBytes is etcd's default --max-request-bytes, 1.5 MiB.
	DefaultMaxRequestBytes = 1536 * 1024
	// DefaultRequestTimeout bounds each request to etcd.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultConflictRetries is how many times a write that lost a race is tried again:
	// the engine's default.
	DefaultConflictRetries = kv.DefaultRetries - 1
	// DefaultClaimTTL is how long a run stays claimed by a store that stopped renewing
	// its claims (a process that died or lost etcd).
	DefaultClaimTTL = 30 * time.Second
	// DefaultPageSize is how many keys one range request reads at most.
	DefaultPageSize = 1000
)

// Smallest accepted limits: below them the engine cannot stage a batch.
const (
	minTxnOps       = 4
	minRequestBytes = 16 * 1024
)

// requestOverhead is what a request to etcd needs beyond its keys and values: the
// framing of each operation and of the transaction, and the server's own wrapping.
const (
	requestOverhead = 4 * 1024
	opOverhead      = 32
)

// Options configures [Open]. A nil *Options, or the zero Options, gives the defaults
// each field documents.
type Options struct {
	// MaxTxnOps is the most operations (compares, and puts or deletes) etcd accepts in
	// one transaction: the server's --max-txn-ops. Zero means [DefaultMaxTxnOps], etcd's
	// default. A batch that needs more is written in several transactions and still
	// becomes visible whole (see the package documentation). Set it when the server's
	// limit differs; [Open] fails when it is above the server's.
	MaxTxnOps int

	// MaxRequestBytes is the largest request etcd accepts: the server's
	// --max-request-bytes. Zero means [DefaultMaxRequestBytes], etcd's default of
	// 1.5 MiB. It bounds the size of each transaction the store sends, and so of one
	// record.
	MaxRequestBytes int

	// RequestTimeout bounds each request to etcd; a request that has no answer by then
	// fails with [ErrUnavailable]. Zero means [DefaultRequestTimeout]. The context given
	// to a method bounds the whole call as well.
	RequestTimeout time.Duration

	// ConflictRetries is how many times UpdateRun, PutOperations and DeleteRun try again
	// after another writer changed the same run between their read and their write,
	// before they fail with [operations.ErrConflict]. Only writers in other processes
	// (other Stores) race a Store's writes: its own writes of one run take turns (see
	// package storage/kv). Zero means
	// [DefaultConflictRetries]; a negative value means no retry.
	ConflictRetries int

	// ClaimTTL is the time to live of the etcd lease that holds this store's claims on
	// runs ([Store.ClaimRun]): when the store stops renewing it (its process died or lost
	// etcd), its claims end that long after the last renewal and other stores may take
	// the runs over. Zero means [DefaultClaimTTL]. etcd rounds it up to whole seconds and
	// to its own minimum.
	ClaimTTL time.Duration

	// Identity names this store in the claims it takes, for people reading etcd; it has
	// no other effect. Empty means the host name and process ID.
	Identity string

	// PageSize is the most keys one range request reads; longer lists are read in pages
	// at one revision. Zero means [DefaultPageSize].
	PageSize int
}

// withDefaults returns a copy of o with the zero fields set to their defaults, or an
// error when a field cannot work.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case c.ConflictRetries == 0:
		c.ConflictRetries = DefaultConflictRetries
	case c.ConflictRetries < 0:
		c.ConflictRetries = 0
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "/" + strconv.Itoa(os.Getpid())
	}
	switch {
	case c.MaxTxnOps < minTxnOps:
		return c, fmt.Errorf("Options.MaxTxnOps %d is below the least this store can work with, %d", c.MaxTxnOps, minTxnOps)
	case c.MaxRequestBytes < minRequestBytes:
		return c, fmt.Errorf("Options.MaxRequestBytes %d is below the least this store can work with, %d", c.MaxRequestBytes, minRequestBytes)
	case c.RequestTimeout < 0, c.ClaimTTL < 0, c.PageSize < 0:
		return c, fmt.Errorf("negative Options: RequestTimeout %s, ClaimTTL %s, PageSize %d", c.RequestTimeout, c.ClaimTTL, c.PageSize)
	}
	return c, nil
}

// leaseTTL is ClaimTTL in whole seconds, rounded up, at least one.
func (o Options) leaseTTL() int64 {
	s := int64((o.ClaimTTL + time.Second - 1) / time.Second)
	return max(s, 1)
}
