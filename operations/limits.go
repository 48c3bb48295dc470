package operations

import "fmt"

// Limits on the strings a record holds, the same on every backend: the validators
// ([Owner.Validate], [Operation.Validate], [Run.Validate], [ValidateRunUpdate],
// [ValidateBatch]) refuse a longer one with an error wrapping [ErrInvalid], before
// anything is written. They bound what one careless or hostile caller or plugin can make
// a store hold, and they are the limits of what can be read back: package
// operations/opsfile's decoder, with its default limits, reads every operation that
// passes [Operation.Validate].
//
// Text that the library builds from someone else's (a plugin's error or description, a
// reason with a prefix, a finalizer's error) is cut to MaxTextBytes instead, visibly: it
// ends with "… [N bytes cut]". Text a caller hands in as it is (a cancel reason, a
// record's fields) is refused.
//
// An operation's times (its Status's Created, Started and Updated) have a limit too:
// [Operation.Validate] refuses one outside years 0000 to 9999 in UTC, which an RFC 3339
// time, and so the itemoperations file that operations/opsfile writes, cannot hold.
const (
	// MaxNameBytes bounds each name and identifier: an owner's Name and UID, an
	// operation's Action and ID, and each field of its ResourceIdentifiers.
	MaxNameBytes = 8 << 10
	// MaxTextBytes bounds each free text: a run's FailureReason, its cancel reason and
	// the reason of each History entry; an operation's Error, OperationUnits and
	// Description.
	MaxTextBytes = 32 << 10
	// MaxSpecBytes bounds the size of an operation's names together: its owner's Name
	// and UID, its Action and ID, and every field of its Resource and of its
	// PostOperationItems (what Velero's itemoperations file keeps in a record's spec).
	// Each post-operation item counts 64 bytes more than its fields, so that a long
	// list of empty items is not free: fewer than 16,384 items fit. The texts of the
	// Status are not counted (each has MaxTextBytes), so that a plugin's report never
	// makes an operation too large.
	MaxSpecBytes = 1 << 20
)

// itemBytes is what MaxSpecBytes counts for each post-operation item beyond its fields.
const itemBytes = 64

// tooLong returns an error wrapping ErrInvalid when s, the field named what, is longer
// than limit bytes. The error gives the length, never the text.
func tooLong(what, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%s of %d bytes exceeds the limit of %d: %w", what, len(s), limit, ErrInvalid)
	}
	return nil
}
