package kubestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// A CheckReport counts the objects of a namespace that [Store.Check] read.
type CheckReport struct {
	// Runs is how many ItemopsRuns hold a run, or should: every one but the runs'
	// marker and the pending objects, damaged ones included.
	Runs int
	// Pending is how many ItemopsRuns are pending: the first commit of their run is in
	// flight, or never came (see the package documentation, "Limits").
	Pending int
	// Chunks is how many ItemopsChunks there are beside the format marker: those that
	// a run's object names, and those that none names or that the store did not name.
	Chunks int
}

// Check reads every object of the store's namespace, changing none, and reports what
// it counted and every object that is not as the store writes it. It checks the
// format marker (there, the one the Store opened, labelled for this store, holding
// this format) and the runs' marker (there, holding the store's identity); decodes
// every run's object on its own, as every read of its run does, whatever its labels
// say (its sum, labels, identity, and name against the run it holds), then reads each
// chunk that it names and checks it against the SHA-256 the object gives, with no
// chunk taken from the Store's cache; and reads the metadata of every chunk: its
// labels and its ownerReference must name the run's object that its name names.
//
// Check reports, each with an error wrapping operations.ErrCorrupt that names the
// object: a marker that is gone, replaced or foreign; a run's object that does not
// decode, or that names a chunk that is gone or damaged; a chunk whose labels or
// ownerReferences disagree with its name; a chunk that no run's object names, saying
// whether a sweep deletes it (it was left by a commit that did not finish, or its
// run's object is gone) or keeps it (a commit in flight on its run might name it; a
// chunk that a run's object which does not decode might name is not reported on its
// own); an ItemopsChunk whose name is not one the store gives; and a pending object
// older than the grace after which a sweep deletes it (a minute). A chunk that a
// commit in flight might name, made less than that grace ago, and a younger pending
// object, are no damage: a commit of another process may be under way. The
// ownerReferences of a run's object are the caller's ([Options.OwnerReference]) and
// are not checked. What the keys hold (the records of runs and operations) is the
// engine's: read every run and its operations through the Store to check them.
//
// The error joins those problems, sorted (see [errors.Join]), and the report counts
// the objects all the same. Check reads as [Store.Sweep] does, one LIST of the chunks'
// metadata and one of the runs' objects, whole, in pages, and GETs the format marker
// and each chunk that a run's object names (a chunk gone because a commit replaced it
// reads the run's object again, as every read does). It is safe for concurrent use,
// and may run while Stores in this process or others write to the namespace. It
// fails with the API server's error, wrapped, when a read fails, and with ctx.Err(),
// wrapped, when ctx ends first; the report is then empty.
func (s *Store) Check(ctx context.Context) (CheckReport, error) {
	return s.b.check(ctx)
}

func (b *backend) check(ctx context.Context) (CheckReport, error) {
	var problems []error
	// note keeps a problem, and returns any other error, which ends the check.
	note := func(err error) error {
		if err != nil && errors.Is(err, operations.ErrCorrupt) && ctx.Err() == nil {
			problems = append(problems, err)
			return nil
		}
		return err
	}
	if err := note(b.checkFormat(ctx)); err != nil {
		return CheckReport{}, b.checkFailed(ctx, err)
	}
	// Every chunk a run's object names is read again, not taken from the cache, whose
	// chunks were checked when they entered it, perhaps before an edit.
	uncached := *b
	uncached.cache = nil
	sv, err := b.survey(ctx, func(p kv.Partition, s stored) error {
		if s.pending {
			return nil
		}
		_, err := uncached.withChunks(ctx, p, s)
		return note(err)
	})
	if err != nil {
		return CheckReport{}, b.checkFailed(ctx, err)
	}
	rep := CheckReport{Runs: sv.objects - len(sv.pending), Pending: len(sv.pending)}
	problems = append(problems, sv.damaged...)
	if err := note(b.checkRunsMarkerObject(sv.marker)); err != nil {
		return CheckReport{}, err
	}
	for _, obj := range sv.pending {
		if age := time.Since(obj.GetCreationTimestamp().Time); age >= pendingGrace {
			problems = append(problems, corrupt(runsResource.Resource, b.ns, obj.GetName(), "pending for %s: the first commit of its run never came; a sweep deletes it", age.Round(time.Second)))
		}
	}
	for _, name := range sv.foreign {
		rep.Chunks++
		problems = append(problems, corrupt(chunksResource.Resource, b.ns, name, "not a name the store gives: neither the format marker nor a chunk"))
	}
	for _, label := range slices.Sorted(maps.Keys(sv.chunks)) {
		r := sv.runs[label]
		for _, c := range sv.chunks[label] {
			rep.Chunks++
			if err := b.checkChunk(c, label, r); err != nil {
				problems = append(problems, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return CheckReport{}, b.checkFailed(ctx, err)
	}
	slices.SortFunc(problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return rep, errors.Join(problems...)
}

// checkFailed returns err, the error that ended a check, with ctx.Err() wrapped in it
// when ctx has ended.
func (b *backend) checkFailed(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("kubestore: check of namespace %s: %w (%v)", b.ns, cerr, err)
	}
	return fmt.Errorf("kubestore: check of namespace %s: %w", b.ns, err)
}

// checkFormat reads the format marker and fails with an error wrapping
// operations.ErrCorrupt when it is gone or replaced since Open, is labelled for
// another store or with another role, does not decode, or holds other keys than when
// the Store opened (see backend.formatKeys).
func (b *backend) checkFormat(ctx context.Context) error {
	m, err := b.readMarker(ctx)
	if err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return corrupt(chunksResource.Resource, b.ns, formatName, format, args...)
	}
	l := m.GetLabels()
	if id, ok := l[labelStore]; ok && id != b.identity {
		return bad("label %s names the store %q, not %q, which this Store opened", labelStore, id, b.identity)
	}
	if l[labelRole] != roleFormat {
		return bad("label %s is %q, not %q", labelRole, l[labelRole], roleFormat)
	}
	s, err := decodeObject(chunksResource, kv.Partition{}, m, "")
	if err != nil {
		return err
	}
	// The engine checked the format when the Store opened, and no writer changes the
	// marker's keys after: the Role grants no update of ItemopsChunks.
	if !maps.EqualFunc(s.keys, b.formatKeys, func(a, b item) bool { return a.ver == b.ver && bytes.Equal(a.value, b.value) }) {
		return bad("its keys are not those it held when the Store opened, whose format the engine checked")
	}
	return nil
}

// checkChunk returns an error wrapping operations.ErrCorrupt that names chunk c when
// its labels or ownerReferences do not name the run's object r (nil: there is none)
// whose label its name carries, or when r does not name it; nil when all is well, or
// when r does not decode (r's own error tells). See Store.Check.
func (b *backend) checkChunk(c chunkMeta, label string, r *sweptRun) error {
	bad := func(format string, args ...any) error {
		return corrupt(chunksResource.Resource, b.ns, c.name, format, args...)
	}
	if c.labels[labelRole] != roleChunk || c.labels[labelRun] != label {
		return bad("labels %s=%q and %s=%q, want %q and %q, as its name says", labelRole, c.labels[labelRole], labelRun, c.labels[labelRun], roleChunk, label)
	}
	switch {
	case r == nil:
		return bad("no run's object names it, and none has the name its own names: a sweep deletes it")
	case r.damaged:
		return nil
	}
	if ref := c.refs; len(ref) != 1 || ref[0].Kind != runKind || ref[0].APIVersion != runsResource.GroupVersion().String() || ref[0].Name != r.name || string(ref[0].UID) != r.uid {
		return bad("its ownerReferences %s do not name %s %s (UID %s), the run's object its name names: the garbage collector may delete it", ownerRefsText(c), runKind, r.name, r.uid)
	}
	switch {
	case r.named[c.name]:
		return nil
	case !r.keeps(c):
		return bad("%s %s does not name it: left by a commit that did not finish; a sweep deletes it", runKind, r.name)
	case time.Since(c.created) < pendingGrace:
		return nil // a commit in flight may name it yet
	}
	return bad("%s %s does not name it: made %s ago for a commit that did not finish, or has not yet; a sweep keeps it until the run's next commit", runKind, r.name, time.Since(c.created).Round(time.Second))
}

// ownerRefsText returns the ownerReferences of c as a message shows them.
func ownerRefsText(c chunkMeta) string {
	if len(c.refs) == 0 {
		return "[]"
	}
	s := "["
	for i, r := range c.refs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s %s (UID %s)", r.APIVersion, r.Kind, r.Name, r.UID)
	}
	return s + "]"
}
