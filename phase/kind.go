package phase

import (
	"fmt"
	"strings"
)

// A Kind names what a machine or a record is for. [Backup] and [Restore] are Velero's
// kinds and need nothing more. Any other Kind is a kind of the caller's own (a
// DatabaseSnapshot, a Migration): it follows the transitions of Backup or Restore, and
// the [Profile] that [Declare] returns says which; every function of this package that
// takes a kind and options needs that profile among the options for such a kind.
type Kind string

// The kinds.
const (
	Backup  Kind = "Backup"
	Restore Kind = "Restore"
)

// MaxKindBytes is the longest name a kind of one's own may have, as a Kubernetes name.
const MaxKindBytes = 63

// ParseKind returns the Kind named s, ignoring case ("backup", "Restore"). Any other
// string gives an error wrapping [ErrUnknownKind]: a kind of one's own is not parsed but
// declared, with [Declare].
func ParseKind(s string) (Kind, error) {
	switch {
	case strings.EqualFold(s, string(Backup)):
		return Backup, nil
	case strings.EqualFold(s, string(Restore)):
		return Restore, nil
	}
	return "", fmt.Errorf("phase: %w %q (want Backup or Restore; a kind of your own is declared with phase.Declare)", ErrUnknownKind, s)
}

// Validate returns nil when k is Backup, Restore, or a name a kind of one's own may
// have: 1 to [MaxKindBytes] ASCII letters and digits, the first a letter, as a
// Kubernetes Kind is written, and neither "Backup" nor "Restore" in another case. Any
// other k gives an error wrapping [ErrUnknownKind]. Validate checks the name only; which
// transitions a kind of one's own follows is its [Profile]'s business (see [Declare]). It
// allocates nothing when k is valid.
func (k Kind) Validate() error {
	if k == Backup || k == Restore {
		return nil
	}
	switch {
	case k == "":
		return fmt.Errorf("phase: %w: empty kind", ErrUnknownKind)
	case len(k) > MaxKindBytes:
		return fmt.Errorf("phase: %w: kind %.20q... is %d bytes long, more than %d", ErrUnknownKind, string(k), len(k), MaxKindBytes)
	case strings.EqualFold(string(k), string(Backup)), strings.EqualFold(string(k), string(Restore)):
		return fmt.Errorf("phase: %w %q: write it %s or %s", ErrUnknownKind, k, Backup, Restore)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("phase: %w %q: a kind is ASCII letters and digits, starting with a letter", ErrUnknownKind, k)
		}
	}
	return nil
}

// Declare returns the profile of kind, a kind of one's own that follows the transitions
// of base (Backup or Restore) with the variants opts select. The profile is an [Option]
// to pass wherever kind is: to [NewMachine], [AfterMainRun], [Path] and the others, and
// as the Profile of the runs of that kind, which carry it from then on:
//
//	profile, err := phase.Declare("DatabaseSnapshot", phase.Backup)
//	m, err := phase.NewMachine("DatabaseSnapshot", phase.New, profile)
//
// With [WithPhases] among opts, the kind has only the phases it names (see there).
//
// Declare(Backup, Backup, opts...) and Declare(Restore, Restore, opts...) return the
// ordinary profile of opts. It fails with an error wrapping [ErrUnknownKind] when kind
// fails [Kind.Validate], when base is neither Backup nor Restore, or when kind is Backup
// or Restore and base is the other: those two cannot follow another machine. It fails
// with an error wrapping [ErrUnknownPhase] when the phases of WithPhases are not a
// machine's, are given for Backup or Restore, or come with [WithQueue] or
// [WithRestoreFinalizing], which the phases replace.
func Declare(kind, base Kind, opts ...Option) (Profile, error) {
	if err := kind.Validate(); err != nil {
		return Profile{}, err
	}
	if base != Backup && base != Restore {
		return Profile{}, fmt.Errorf("phase: %w: kind %s cannot follow %q (want Backup or Restore)", ErrUnknownKind, kind, base)
	}
	if (kind == Backup || kind == Restore) && kind != base {
		return Profile{}, fmt.Errorf("phase: %w: kind %s cannot follow %s", ErrUnknownKind, kind, base)
	}
	for _, o := range opts {
		if named, ok := o.(phasesOption); ok {
			for _, p := range named {
				if p.index() < 0 {
					return Profile{}, fmt.Errorf("phase: %w %q among the phases of %s", ErrUnknownPhase, p, kind)
				}
			}
		}
	}
	if asked := applied(opts); asked.Phases != 0 {
		if kind == Backup || kind == Restore {
			return Profile{}, fmt.Errorf("phase: %w: %s keeps Velero's phases; WithPhases is for a kind of one's own", ErrUnknownPhase, kind)
		}
		if asked.Queue || asked.RestoreFinalizing {
			return Profile{}, fmt.Errorf("phase: %w: the phases of %s come with WithQueue or WithRestoreFinalizing; name Queued and ReadyToStart, or Finalizing and FinalizingPartiallyFailed, among the phases instead", ErrUnknownPhase, kind)
		}
		if err := checkPhases(kind, asked.Phases); err != nil {
			return Profile{}, err
		}
	}
	p := ProfileOf(kind, append(opts[:len(opts):len(opts)], Profile{Base: base})...)
	return p, nil
}

// base returns the kind whose transitions kind follows with profile p: kind itself for
// Backup and Restore, p.Base for a kind of one's own. It fails with an error wrapping
// ErrUnknownKind when kind is not a valid name, when a kind of one's own has no base,
// and when Backup or Restore is given another base. It allocates nothing on success.
func base(kind Kind, p Profile) (Kind, error) {
	if kind == Backup || kind == Restore {
		if p.Base != "" && p.Base != kind {
			return "", fmt.Errorf("phase: %w: kind %s cannot follow %s", ErrUnknownKind, kind, p.Base)
		}
		return kind, nil
	}
	if err := kind.Validate(); err != nil {
		return "", err
	}
	switch p.Base {
	case Backup, Restore:
		return p.Base, nil
	case "":
		return "", fmt.Errorf("phase: %w %q (want Backup or Restore, or a kind declared with phase.Declare and its profile passed as an option)", ErrUnknownKind, kind)
	}
	return "", fmt.Errorf("phase: %w: kind %s cannot follow %q (want Backup or Restore)", ErrUnknownKind, kind, p.Base)
}

// noun is k with its article, for messages: "a backup" and "a restore" as Velero's
// messages write them, and a kind of one's own as it is written ("a DatabaseSnapshot",
// "an AppBackup").
func (k Kind) noun() string {
	if k == Backup || k == Restore {
		return "a " + strings.ToLower(string(k))
	}
	if k != "" && strings.ContainsRune("AEIOUaeiou", rune(k[0])) {
		return "an " + string(k)
	}
	return "a " + string(k)
}
