package phase

import "strings"

// An Option selects a variant of the transitions. Options that do not concern a machine's
// kind are ignored: [WithQueue] changes only backups, [WithRestoreFinalizing] only restores.
type Option interface{ apply(Profile) Profile }

// A Profile is the set of variants a machine follows. Its zero value is the design's
// default profile. A Profile is itself an [Option] that adds its variants, so a profile
// stored beside a record can be passed straight back:
//
//	m, err := phase.NewMachine(run.Kind, run.Phase, run.Profile)
type Profile struct {
	// Queue sends backups through New → Queued → ReadyToStart → InProgress, as Velero
	// does since it processes backups concurrently. New → InProgress is then refused.
	Queue bool `json:"queue,omitempty"`
	// RestoreFinalizing sends restores through Finalizing and FinalizingPartiallyFailed
	// before their terminal phase, as Velero does since 1.12, instead of straight to
	// Completed or PartiallyFailed.
	RestoreFinalizing bool `json:"restoreFinalizing,omitempty"`
	// Base is the kind whose transitions a kind of one's own follows, Backup or Restore
	// ([Declare] sets it). It is empty for Backup and Restore themselves.
	Base Kind `json:"base,omitempty"`
	// Phases, when not empty, are the phases of a kind of one's own declared with
	// [WithPhases]: its machine is the base's transitions among them, and Queue and
	// RestoreFinalizing are unset. It is empty for Backup and Restore.
	Phases Set `json:"phases,omitempty"`
}

func (p Profile) apply(to Profile) Profile {
	to.Queue = to.Queue || p.Queue
	to.RestoreFinalizing = to.RestoreFinalizing || p.RestoreFinalizing
	if p.Base != "" {
		to.Base = p.Base
	}
	if p.Phases != 0 {
		to.Phases = p.Phases
	}
	return to
}

// The options as values, so that passing one allocates nothing.
var (
	queueOption             Option = Profile{Queue: true}
	restoreFinalizingOption Option = Profile{RestoreFinalizing: true}
)

// WithQueue returns the option of queued backups: New → Queued → ReadyToStart → InProgress.
func WithQueue() Option { return queueOption }

// WithRestoreFinalizing returns the option of restores that go through Finalizing.
func WithRestoreFinalizing() Option { return restoreFinalizingOption }

// String names the profile: "default", "queue", "restore-finalizing", or both joined by a
// comma; a profile with a Base starts with "backup-like" or "restore-like" instead of
// "default" ("backup-like,queue"), and names its phases when it was declared with
// [WithPhases] ("backup-like,phases=New+InProgress+...").
func (p Profile) String() string {
	if p.Base != "" {
		s := strings.ToLower(string(p.Base)) + "-like"
		if q := (Profile{Queue: p.Queue, RestoreFinalizing: p.RestoreFinalizing}); q != (Profile{}) {
			s += "," + q.String()
		}
		if p.Phases != 0 {
			s += ",phases=" + p.Phases.String()
		}
		return s
	}
	switch {
	case p.Queue && p.RestoreFinalizing:
		return "queue,restore-finalizing"
	case p.Queue:
		return "queue"
	case p.RestoreFinalizing:
		return "restore-finalizing"
	}
	return "default"
}

// ProfileOf returns the profile that opts select for kind, dropping the variants that do
// not concern kind (for a kind of one's own, those that do not concern its base; for
// Backup and Restore, the Phases of [WithPhases]; with Phases, the Queue and
// RestoreFinalizing that the phases replace), and dropping a Base that is kind itself
// (Backup following Backup is just Backup). It is what [Machine.Profile] reports for a
// machine built with opts. When several options name a Base or Phases, the last counts.
func ProfileOf(kind Kind, opts ...Option) Profile {
	p := applied(opts)
	if p.Base == kind {
		p.Base = ""
	}
	if kind == Backup || kind == Restore {
		p.Phases = 0
	} else if p.Phases != 0 {
		p.Queue, p.RestoreFinalizing = false, false
	}
	if kind != Backup && kind != Restore {
		kind = p.Base
	}
	switch kind {
	case Backup:
		p.RestoreFinalizing = false
	case Restore:
		p.Queue = false
	}
	return p
}

// applied is the profile opts ask for, each applied in turn, before ProfileOf drops
// what a kind ignores.
func applied(opts []Option) Profile {
	var p Profile
	for _, o := range opts {
		if o != nil {
			p = o.apply(p)
		}
	}
	return p
}
