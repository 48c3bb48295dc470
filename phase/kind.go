package phase

import (
	"fmt"
	"strings"
)

// A Kind says whether a machine or a record is for a backup or a restore.
type Kind string

// The kinds.
const (
	Backup  Kind = "Backup"
	Restore Kind = "Restore"
)

// ParseKind returns the Kind named s, ignoring case ("backup", "Restore"). Any other
// string gives an error wrapping [ErrUnknownKind].
func ParseKind(s string) (Kind, error) {
	switch {
	case strings.EqualFold(s, string(Backup)):
		return Backup, nil
	case strings.EqualFold(s, string(Restore)):
		return Restore, nil
	}
	return "", fmt.Errorf("phase: %w %q (want Backup or Restore)", ErrUnknownKind, s)
}

// valid reports whether k is Backup or Restore.
func (k Kind) valid() bool { return k == Backup || k == Restore }

// noun is the lowercase word for k, as Velero's messages use it.
func (k Kind) noun() string { return strings.ToLower(string(k)) }
