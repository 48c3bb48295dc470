package boltstore

import (
	"os"
	"time"
)

// DefaultTimeout is how long [Open] waits for the file lock when [Options.Timeout] is zero.
const DefaultTimeout = time.Second

// DefaultMode is the permission of a file [Open] creates when [Options.Mode] is zero:
// readable and writable by its owner only.
const DefaultMode os.FileMode = 0o600

// Options configures [Open]. A nil *Options, or the zero Options, gives the defaults
// each field documents.
type Options struct {
	// Timeout is how long Open waits for the file lock that another Store holds, in this
	// process or another, before it fails with [ErrLocked]. Zero means [DefaultTimeout];
	// a negative value means a single attempt. Open never waits forever.
	Timeout time.Duration

	// Mode is the permission of the file when Open creates it. Zero means [DefaultMode]
	// (0600). An existing file keeps its permission.
	Mode os.FileMode

	// NoSync skips the fsync at the end of each write transaction. A killed process still
	// loses nothing it was told was written, but a crash of the machine or its power may
	// lose acknowledged writes or corrupt the file. It is meant for tests and benchmarks
	// only. The default, false, syncs every write.
	NoSync bool

	// SkipCheck makes Open skip the check of the file that it makes by default before
	// it reads anything else (see [Store.Check]). With the check, a damaged file fails
	// Open with [ErrCorrupt], unchanged: the check reads every page that holds data, and
	// both meta pages, at a cost in CPU per MiB of the file, and a read of the file from
	// disk when it is not cached (docs/BENCHMARKS.md, "boltstore: the check of a file",
	// has the figures). Skip it only for a file known to be sound, such as one this
	// process wrote, when opening it must not read it whole. Without the check, a file
	// whose pages were damaged so that they form a cycle makes bbolt loop forever at the
	// first read that meets the cycle, a rolled-back last transaction goes unseen, a
	// damaged page header or branch page can hide entries from every read, and a damaged
	// freelist is found only by a later write; a changed key, value or leaf element of
	// the kv bucket is still ErrCorrupt at the first read that meets it or misses an
	// entry because of it (see the package documentation, "Damage").
	SkipCheck bool

	// ReadOnly opens the file for reading only: Open never creates, migrates or writes
	// it, and every write of the Store fails with [ErrReadOnly]. A file that does not
	// exist fails Open with an error wrapping fs.ErrNotExist, and an empty one with
	// [ErrNotStore]. The lock is shared: several read-only Stores, in this process or
	// others, may hold the file at once, while a Store that writes waits for all of them
	// to close (up to Timeout), as they wait for it. A file of schema 1, which a writable
	// Open would migrate, is read through a migrated copy made at Open in the system's
	// temporary directory ([os.TempDir]); Close removes the copy.
	ReadOnly bool

	// NoInit makes Open refuse a file that exists but is not yet a store, where it would
	// make it one: an empty file, or a bbolt file that holds no bucket, fails Open with
	// [ErrNotStore] and is left byte for byte as it was. A file that does not exist is
	// still created (see [Open]). The default, false, makes such a file a store. The
	// itemops command's cancel and demo set it, so that no command turns a file that was
	// not a store into one.
	NoInit bool

	// OpenFile opens the file, in place of os.OpenFile, which is the default when it is
	// nil. It is a hook for hermetic tests: to inject failures or to see the flags and
	// permission the file is opened with.
	OpenFile func(name string, flag int, perm os.FileMode) (*os.File, error)
}

// withDefaults returns a copy of o with the zero fields set to their defaults.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Mode == 0 {
		c.Mode = DefaultMode
	}
	if c.OpenFile == nil {
		c.OpenFile = os.OpenFile
	}
	return c
}
