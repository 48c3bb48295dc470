package etcdstore

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Kind bytes, the first byte of a run key. Backup sorts before Restore.
const (
	kindBackup  = 'B'
	kindRestore = 'R'
)

// formatName and schemaVersion are what the format key of every store holds.
const (
	formatName    = "itemops.etcdstore"
	schemaVersion = 1
)

// layout builds the keys of one store from its prefix. See the package documentation
// for the whole layout.
type layout struct {
	prefix string // "" or ends with "/"
}

func newLayout(prefix string) layout {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return layout{prefix: prefix}
}

func (l layout) format() string { return l.prefix + "format" }

// runs is the prefix of the run records; runsOf narrows it to a kind ("" for both).
func (l layout) runs() string { return l.prefix + "runs/" }

// run is the key of the run record of o: its kind byte, then its name, verbatim, so that
// keys sort by kind, then name.
func (l layout) run(o operations.Owner) string { return l.runs() + runID(o) }

// phase is the prefix of the index entries of runs in phase p.
func (l layout) phase(p phase.Phase) string { return l.prefix + "phases/" + string(p) + "/" }

// ops is the prefix of every key that belongs to the operations of the run of o. The
// name is path-escaped, so that no run's prefix is a prefix of another's.
func (l layout) ops(o operations.Owner) string {
	return l.prefix + "ops/" + kindByte(o.Kind) + url.PathEscape(o.Name) + "/"
}

// claim is the key of the claim on the run of o.
func (l layout) claim(o operations.Owner) string {
	return l.prefix + "claims/" + kindByte(o.Kind) + url.PathEscape(o.Name)
}

// Keys inside a run's operations prefix.
const (
	keyMeta   = "meta"
	dirOpen   = "open/"   // records of New and InProgress operations, by sequence number
	dirDone   = "done/"   // records of Completed and Failed operations, by sequence number
	dirIDs    = "ids/"    // operation ID → sequence number and phase code
	dirStaged = "staged/" // chunks of batches too large for one transaction
)

// runID is the part of a run key after the runs prefix.
func runID(o operations.Owner) string { return kindByte(o.Kind) + o.Name }

func kindByte(k phase.Kind) string {
	switch k {
	case phase.Backup:
		return string(rune(kindBackup))
	case phase.Restore:
		return string(rune(kindRestore))
	}
	return ""
}

// ownerOf returns the owner (without UID) that the part of a run key after its prefix
// names.
func ownerOf(id string) (operations.Owner, error) {
	if len(id) < 2 {
		return operations.Owner{}, fmt.Errorf("run key %q: %w", id, ErrCorrupt)
	}
	var o operations.Owner
	switch id[0] {
	case kindBackup:
		o.Kind = phase.Backup
	case kindRestore:
		o.Kind = phase.Restore
	default:
		return operations.Owner{}, fmt.Errorf("run key %q: unknown kind byte: %w", id, ErrCorrupt)
	}
	o.Name = id[1:]
	return o, nil
}

// seqKey is the 16-digit hexadecimal form of a sequence number, so that keys sort in
// first-put order.
func seqKey(seq uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[seq&0xf]
		seq >>= 4
	}
	return string(b[:])
}

func parseSeq(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("sequence key %q: %w", s, ErrCorrupt)
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("sequence key %q: %w", s, ErrCorrupt)
	}
	return n, nil
}
