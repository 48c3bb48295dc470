package operations

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/itemops/itemops/phase"
)

// An Owner is the backup, restore, or resource of a kind of one's own (see
// [phase.Declare]) an operation belongs to. Kind and Name name its run;
// UID, when set, says which object of that name it is (Velero's files record it): a store
// refuses an owner whose UID differs from its stored run's with [ErrUIDMismatch], so a
// re-created object never takes over a stale run. An empty UID matches any.
type Owner struct {
	Kind phase.Kind
	Name string
	UID  string
}

// String returns "Kind/Name".
func (o Owner) String() string { return string(o.Kind) + "/" + o.Name }

// Validate reports an error wrapping [ErrInvalid] unless the kind passes
// [phase.Kind.Validate] (Backup, Restore, or the name of a kind of one's own), the name
// is not empty, and the name and UID are at most [MaxNameBytes] long. A bad kind's error
// wraps phase.ErrUnknownKind too. Whether a kind of one's own is declared is checked
// with the run's profile, by [Run.Validate].
func (o Owner) Validate() error {
	if err := o.Kind.Validate(); err != nil {
		return fmt.Errorf("owner %s: %w: %w", o, ErrInvalid, err)
	}
	if o.Name == "" {
		return fmt.Errorf("owner %s: empty name: %w", o, ErrInvalid)
	}
	if err := cmp.Or(tooLong("name", o.Name, MaxNameBytes), tooLong("UID", o.UID, MaxNameBytes)); err != nil {
		return fmt.Errorf("owner of kind %s: %w", o.Kind, err)
	}
	return nil
}

// A ResourceIdentifier names a Kubernetes object. The field names are the JSON keys Velero
// writes for it.
type ResourceIdentifier struct {
	Group     string
	Resource  string
	Namespace string
	Name      string
}

// String returns "resource.group namespace/name", leaving out what is empty.
func (r ResourceIdentifier) String() string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Namespace != "" {
		return s + " " + r.Namespace + "/" + r.Name
	}
	return s + " " + r.Name
}

// An OperationPhase is the state of one plugin operation, written as Velero writes it.
type OperationPhase string

// The operation phases. New and InProgress are unfinished; Completed and Failed are final.
const (
	OperationNew        OperationPhase = "New"
	OperationInProgress OperationPhase = "InProgress"
	OperationCompleted  OperationPhase = "Completed"
	OperationFailed     OperationPhase = "Failed"
)

// Valid reports whether p is one of the four operation phases.
func (p OperationPhase) Valid() bool {
	switch p {
	case OperationNew, OperationInProgress, OperationCompleted, OperationFailed:
		return true
	}
	return false
}

// Finished reports whether p is Completed or Failed.
func (p OperationPhase) Finished() bool { return p == OperationCompleted || p == OperationFailed }

// An Operation is the durable record of one long-running operation a plugin started for
// one item of a backup or restore.
type Operation struct {
	Owner Owner
	// Action is the name the plugin was registered under; it selects the Tracker that is
	// asked for progress.
	Action string
	// Resource is the item the plugin acted on.
	Resource ResourceIdentifier
	// ID is the plugin's operation ID, unique within the owner.
	ID string
	// PostOperationItems are items to back up again once the operation ends (backups only).
	PostOperationItems []ResourceIdentifier
	Status             Status
	// Monitor is what a Monitor with a stall timeout or a retry policy (package
	// operations/monitor) keeps of the operation between its checks. It is zero
	// unless such a policy is set, and it is never written to an itemoperations file.
	Monitor MonitorState
}

// MonitorState is what a Monitor keeps of an unfinished operation between checks, so
// that a stall window and a retry schedule go on across a restart of the Monitor or a
// handover of the run to another one: every store keeps it with the operation. It is
// Velero's OperationStatus's no field, so package operations/opsfile leaves it out. Its
// zero value means that no policy has looked at the operation; times are by the
// Monitor's clock, in UTC, and the zero time means unset.
type MonitorState struct {
	// ProgressAt is when the Monitor last saw the plugin's report move: an NCompleted
	// above every one it had seen of the operation (see MaxCompleted).
	ProgressAt time.Time
	// MaxCompleted is the highest NCompleted the Monitor has seen of the operation under
	// a stall timeout, kept only while the plugin reports less (Status.NCompleted is
	// below it); zero otherwise, when Status.NCompleted is the highest. A report moves
	// only when its NCompleted passes the higher of the two, so that progress that goes
	// back and forth (12, 11, 12, 11) is not taken for movement.
	MaxCompleted int64
	// Attempts counts the Progress errors in a row that the Monitor retried; zero after
	// an answer.
	Attempts int
	// ErrorSince is when the first of those errors came; zero when Attempts is.
	ErrorSince time.Time
	// NextPoll is when the Monitor may ask the plugin again; the zero time means at the
	// next pass.
	NextPoll time.Time
	// LastError is the text of the last error retried, at most MaxTextBytes long.
	LastError string
}

// Status is what is known of an operation's progress.
type Status struct {
	Phase OperationPhase
	Error string
	// NCompleted and NTotal are the plugin's last counts, as it reported them. Neither
	// may be negative; NCompleted may exceed NTotal (a plugin whose total is an estimate
	// passes it), and is stored so, as Velero stores it.
	NCompleted     int64
	NTotal         int64
	OperationUnits string
	Description    string
	// Created is when the operation was recorded; the operation timeout counts from it.
	// Started and Updated come from the plugin. The zero time means unset. Each must
	// lie in years 0000 to 9999 in UTC, the years that an RFC 3339 time, and so
	// Velero's itemoperations file, can hold: [Operation.Validate] refuses any other.
	Created, Started, Updated time.Time
}

// Progress is what a plugin reports about one operation, as Velero's OperationProgress.
type Progress struct {
	// Completed is true once the operation has ended, successfully or not.
	Completed bool
	// Err is set when the operation failed.
	Err string
	// NCompleted and NTotal count the work done and the work there is, in
	// OperationUnits. NCompleted may exceed NTotal: the Monitor records the counts as
	// reported. A negative count fails the operation.
	NCompleted, NTotal int64
	// OperationUnits names what NCompleted and NTotal count, usually "Bytes".
	OperationUnits string
	Description    string
	// Started and Updated are when the plugin started the operation and last saw
	// progress; the zero time (or the Unix epoch) means unknown. A time outside years
	// 0000 to 9999 in UTC, which no store accepts (see [Status]), fails the operation,
	// as a negative count does: the Monitor records the failure, naming the field and
	// the time, and none of the report.
	Started, Updated time.Time
}

// Clone returns a copy of op that shares no memory with it.
func (op Operation) Clone() Operation {
	op.PostOperationItems = slices.Clone(op.PostOperationItems)
	return op
}

// Validate reports an error wrapping [ErrInvalid] when op has an invalid owner, an empty
// ID, an unknown phase, a negative progress count (NCompleted, NTotal, or MonitorState's
// MaxCompleted) or attempt count, a time (Created, Started, Updated, or one of its
// MonitorState) outside years 0000 to 9999 in UTC, a name longer than
// [MaxNameBytes], a text longer than [MaxTextBytes], or names and post-operation items
// of more than [MaxSpecBytes] in all (see the limits). The error names the limit and
// gives the size, never the text; for a time, it names the field and gives the time.
func (op Operation) Validate() error {
	if err := op.Owner.Validate(); err != nil {
		return err
	}
	if err := cmp.Or(
		tooLong("ID", op.ID, MaxNameBytes),
		tooLong("action", op.Action, MaxNameBytes),
		op.Resource.tooLong("resource"),
	); err != nil {
		return fmt.Errorf("operation of %s: %w", op.Owner, err)
	}
	if n := op.specBytes(); n > MaxSpecBytes {
		return fmt.Errorf("operation %q of %s: names and %d post-operation items of %d bytes in all exceed the limit of %d (MaxSpecBytes): %w",
			op.ID, op.Owner, len(op.PostOperationItems), n, MaxSpecBytes, ErrInvalid)
	}
	if op.ID == "" {
		return fmt.Errorf("operation of %s on %s: empty ID: %w", op.Owner, op.Resource, ErrInvalid)
	}
	if !op.Status.Phase.Valid() {
		return fmt.Errorf("operation %q of %s: unknown phase %q: %w", op.ID, op.Owner, op.Status.Phase, ErrInvalid)
	}
	st, ms := &op.Status, &op.Monitor
	err := cmp.Or(checkReport(st.NCompleted, st.NTotal, st.Started, st.Updated), checkTime("created", st.Created),
		checkTime("progress", ms.ProgressAt), checkTime("error since", ms.ErrorSince), checkTime("next poll", ms.NextPoll))
	if err == nil && ms.Attempts < 0 {
		err = fmt.Errorf("negative attempts (%d)", ms.Attempts)
	}
	if err == nil && ms.MaxCompleted < 0 {
		err = fmt.Errorf("negative highest count completed (%d)", ms.MaxCompleted)
	}
	if err != nil {
		return fmt.Errorf("operation %q of %s: %w: %w", op.ID, op.Owner, err, ErrInvalid)
	}
	err = cmp.Or(
		tooLong("error", op.Status.Error, MaxTextBytes),
		tooLong("operation units", op.Status.OperationUnits, MaxTextBytes),
		tooLong("description", op.Status.Description, MaxTextBytes),
		tooLong("last error", op.Monitor.LastError, MaxTextBytes),
	)
	for i := 0; err == nil && i < len(op.PostOperationItems); i++ {
		if err = op.PostOperationItems[i].tooLong("post-operation item"); err != nil {
			err = fmt.Errorf("item %d: %w", i, err)
		}
	}
	if err != nil {
		return fmt.Errorf("operation %q of %s: %w", op.ID, op.Owner, err)
	}
	return nil
}

// Validate reports an error wrapping [ErrInvalid] when p is a report that no store
// could record: a negative count (NCompleted or NTotal), or a time (Started or Updated)
// outside years 0000 to 9999 in UTC. The error names the counts, or the field and the
// time. The Monitor fails the operation of such a report, with that error as its
// message; NCompleted above NTotal is valid.
func (p Progress) Validate() error {
	if err := checkReport(p.NCompleted, p.NTotal, p.Started, p.Updated); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}

// checkReport is the rule for what a plugin reports, of a Progress and so of a
// Status: counts that are not negative and times that an itemoperations file can
// hold. Its error wraps no sentinel: the caller adds ErrInvalid.
func checkReport(nCompleted, nTotal int64, started, updated time.Time) error {
	if nCompleted < 0 || nTotal < 0 {
		return fmt.Errorf("negative progress (%d of %d)", nCompleted, nTotal)
	}
	return cmp.Or(checkTime("started", started), checkTime("updated", updated))
}

// checkTime returns nil when t, in UTC, lies in years 0000 to 9999, the years that an
// RFC 3339 time has four digits for, and so the years that operations/opsfile, which
// writes times in RFC 3339 in UTC as Velero does, can write; the zero time (year 1)
// does. Otherwise it returns an error that names the field, what, and gives t in UTC
// to the nanosecond, such as "started time 10000-01-01T00:00:00Z outside years 0000
// to 9999 in UTC". This is the one place that says which years those are.
func checkTime(what string, t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s time %s outside years 0000 to 9999 in UTC", what, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// specBytes returns the size of op's names and post-operation items, as MaxSpecBytes
// counts it.
func (op *Operation) specBytes() int {
	n := len(op.Owner.Name) + len(op.Owner.UID) + len(op.Action) + len(op.ID) + op.Resource.bytes()
	for i := range op.PostOperationItems {
		n += itemBytes + op.PostOperationItems[i].bytes()
	}
	return n
}

// bytes returns the bytes of r's fields together.
func (r ResourceIdentifier) bytes() int {
	return len(r.Group) + len(r.Resource) + len(r.Namespace) + len(r.Name)
}

// tooLong returns an error wrapping ErrInvalid when a field of r, named what, is longer
// than MaxNameBytes. It allocates nothing when none is.
func (r ResourceIdentifier) tooLong(what string) error {
	for _, f := range [...]struct{ name, s string }{{"group", r.Group}, {"resource", r.Resource}, {"namespace", r.Namespace}, {"name", r.Name}} {
		if len(f.s) > MaxNameBytes {
			return tooLong(what+" "+f.name, f.s, MaxNameBytes)
		}
	}
	return nil
}
