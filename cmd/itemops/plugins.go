package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// The names the demo's plugins are registered under.
const (
	moverName   = "demo.itemops.io/data-mover" // v2: backup and restore item actions
	labelerName = "demo.itemops.io/labeler"    // v1: a backup item action, adapted
)

// backupObject and restoreObject stand for a host's own Backup and Restore resources,
// which the plugins receive with every call.
type (
	backupObject  struct{ Name string }
	restoreObject struct{ Name string }
)

// A fate is how a demo operation ends.
type fate string

const (
	fateOK   fate = "ok"   // completes
	fateFail fate = "fail" // reports a failure at 60% of its data
	fateHang fate = "hang" // stalls at 90% and never ends, until the Monitor times it out
)

// A job is what a demo operation does. Its operation ID spells it out
// ("upload-3.140000000.18f9c2a1b2c.960.ok": verb and number, then in hexadecimal the
// bytes to move, the start in Unix milliseconds and the duration in milliseconds, then the
// fate), so a process that did not start it, such as the demo resumed after a crash, can
// still report on it, as a real data mover's jobs outlive the controller that started
// them.
type job struct {
	verb  string // "upload" or "download"
	seq   uint64
	size  int64
	start time.Time     // to the millisecond
	dur   time.Duration // to the millisecond
	fate  fate
}

func (j job) id() string {
	return fmt.Sprintf("%s-%d.%x.%x.%x.%s", j.verb, j.seq, j.size, j.start.UnixMilli(), j.dur.Milliseconds(), j.fate)
}

// parseJob reads an operation ID written by job.id.
func parseJob(id string) (job, bool) {
	parts := strings.Split(id, ".")
	if len(parts) != 5 {
		return job{}, false
	}
	verb, seqText, ok := strings.Cut(parts[0], "-")
	if !ok || (verb != "upload" && verb != "download") {
		return job{}, false
	}
	seq, err1 := strconv.ParseUint(seqText, 10, 64)
	size, err2 := strconv.ParseInt(parts[1], 16, 64)
	start, err3 := strconv.ParseInt(parts[2], 16, 64)
	dur, err4 := strconv.ParseInt(parts[3], 16, 64)
	f := fate(parts[4])
	if err := errors.Join(err1, err2, err3, err4); err != nil || size <= 0 || dur <= 0 ||
		(f != fateOK && f != fateFail && f != fateHang) {
		return job{}, false
	}
	return job{verb: verb, seq: seq, size: size, start: time.UnixMilli(start), dur: time.Duration(dur) * time.Millisecond, fate: f}, true
}

// progressAt is where a job stood at some time.
func (j job) progressAt(now time.Time) operations.Progress {
	p := operations.Progress{NTotal: j.size, OperationUnits: "Bytes", Started: j.start}
	elapsed := now.Sub(j.start)
	moved := func(d time.Duration) int64 {
		d = max(d, 0)
		return min(int64(float64(j.size)*(float64(d)/float64(j.dur))), j.size)
	}
	switch {
	case j.fate == fateFail && elapsed >= j.dur*6/10:
		end := j.dur * 6 / 10
		p.Completed, p.Err, p.Description = true, "connection to the object store reset (failure injected by -fail-rate)", "failed"
		p.NCompleted, p.Updated = moved(end), j.start.Add(end)
	case j.fate == fateHang && elapsed >= j.dur*9/10:
		end := j.dur * 9 / 10
		p.Description = "stalled"
		p.NCompleted, p.Updated = moved(end), j.start.Add(end)
	case j.fate == fateOK && elapsed >= j.dur:
		p.Completed, p.Description = true, "completed"
		p.NCompleted, p.Updated = j.size, j.start.Add(j.dur)
	default:
		p.Description = j.verb + "ing"
		p.NCompleted, p.Updated = moved(elapsed), now
		if p.NCompleted == j.size {
			p.NCompleted-- // not done until it says so
		}
	}
	return p
}

// finished reports whether the job has ended by now, by itself.
func (j job) finished(now time.Time) bool {
	return j.progressAt(now).Completed
}

// moverConfig says how long the demo's operations take and how many go wrong.
type moverConfig struct {
	minDuration, maxDuration time.Duration // each operation takes between these
	failRate                 float64       // the share of operations that fail or hang
}

// A mover is the demo's data mover: a v2 plugin that moves a volume claim's data to or
// from an object store, in the background, taking a while. It serves as a backup item
// action (uploads) and a restore item action (downloads) under one name. Its jobs are
// simulated: they move data at a steady rate by its clock, and their operation IDs hold
// everything needed to report on them (see job). Which jobs fail, and how, is decided
// from the owner and the claim, so it is the same however often the demo runs.
//
// A mover is safe for concurrent use.
type mover struct {
	clock clock.Clock
	cfg   moverConfig
	seq   atomic.Uint64

	// cancelledMu guards cancelled: the jobs Cancel stopped, with where they stood then.
	// A process that restarts forgets them, but the Monitor never asks about an
	// operation again once it cancelled it.
	cancelledMu sync.Mutex
	cancelled   map[string]operations.Progress
}

func newMover(clock clock.Clock, cfg moverConfig) *mover {
	return &mover{clock: clock, cfg: cfg, cancelled: make(map[string]operations.Progress)}
}

// start starts a job of verb for claim, a persistent volume claim of owner's.
func (m *mover) start(ctx context.Context, verb, owner string, claim runtime.Unstructured) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if claim == nil {
		return "", errors.New("no volume claim given")
	}
	content := claim.UnstructuredContent()
	request, found, err := unstructured.NestedString(content, "spec", "resources", "requests", "storage")
	if err != nil || !found {
		return "", errors.New("the volume claim requests no storage")
	}
	q, err := resource.ParseQuantity(request)
	if err != nil || q.Value() <= 0 {
		return "", fmt.Errorf("the volume claim's storage request %q is not a size", request)
	}
	ns, _, _ := unstructured.NestedString(content, "metadata", "namespace")
	name, _, _ := unstructured.NestedString(content, "metadata", "name")
	key := owner + "/" + ns + "/" + name
	spread := float64(m.cfg.maxDuration - m.cfg.minDuration)
	dur := m.cfg.minDuration + time.Duration(spread*unitHash(key+"#duration"))
	dur = max(dur.Round(time.Millisecond), time.Millisecond)
	f := fateOK
	if unitHash(key+"#fate") < m.cfg.failRate {
		f = fateFail
		if unitHash(key+"#how") < 0.5 {
			f = fateHang
		}
	}
	j := job{verb: verb, seq: m.seq.Add(1), size: q.Value(), start: m.clock.Now().Truncate(time.Millisecond), dur: dur, fate: f}
	return j.id(), nil
}

// progress reports on job id.
func (m *mover) progress(ctx context.Context, id string) (operations.Progress, error) {
	if err := ctx.Err(); err != nil {
		return operations.Progress{}, err
	}
	j, ok := parseJob(id)
	if !ok {
		return operations.Progress{}, operations.InvalidOperationID(moverName, id)
	}
	m.cancelledMu.Lock()
	p, cancelled := m.cancelled[id]
	m.cancelledMu.Unlock()
	if cancelled {
		return p, nil
	}
	return j.progressAt(m.clock.Now()), nil
}

// cancel stops job id if it is still running.
func (m *mover) cancel(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j, ok := parseJob(id)
	if !ok {
		return operations.InvalidOperationID(moverName, id)
	}
	now := m.clock.Now()
	if j.finished(now) {
		return nil
	}
	m.cancelledMu.Lock()
	defer m.cancelledMu.Unlock()
	if _, done := m.cancelled[id]; !done {
		p := j.progressAt(now)
		p.Completed, p.Err, p.Description = true, "cancelled", "cancelled"
		m.cancelled[id] = p
	}
	return nil
}

var claimsOnly = adapters.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}

// backupAction is the mover as a backup item action: it uploads each claim's data and
// asks for the claim to be backed up again once the upload ends.
type backupAction struct{ m *mover }

var _ adapters.BackupItemAction[*backupObject] = backupAction{}

func (backupAction) Name() string { return moverName }

func (backupAction) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return claimsOnly, ctx.Err()
}

func (a backupAction) Execute(ctx context.Context, item runtime.Unstructured, b *backupObject) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	name := ""
	if b != nil {
		name = b.Name
	}
	id, err := a.m.start(ctx, "upload", name, item)
	if err != nil {
		return nil, nil, "", nil, err
	}
	content := item.UnstructuredContent()
	ns, _, _ := unstructured.NestedString(content, "metadata", "namespace")
	claim, _, _ := unstructured.NestedString(content, "metadata", "name")
	post := []operations.ResourceIdentifier{{Resource: "persistentvolumeclaims", Namespace: ns, Name: claim}}
	return item, nil, id, post, nil
}

func (a backupAction) Progress(ctx context.Context, id string, _ *backupObject) (operations.Progress, error) {
	return a.m.progress(ctx, id)
}

func (a backupAction) Cancel(ctx context.Context, id string, _ *backupObject) error {
	return a.m.cancel(ctx, id)
}

// restoreAction is the mover as a restore item action: it downloads each claim's data
// into the restored volume, an operation of its own that the restore waits for.
type restoreAction struct{ m *mover }

var _ adapters.RestoreItemAction[*restoreObject] = restoreAction{}

func (restoreAction) Name() string { return moverName }

func (restoreAction) AppliesTo(ctx context.Context) (adapters.ResourceSelector, error) {
	return claimsOnly, ctx.Err()
}

func (a restoreAction) Execute(ctx context.Context, in adapters.RestoreItemActionInput[*restoreObject]) (adapters.RestoreItemActionOutput, error) {
	name := ""
	if in.Restore != nil {
		name = in.Restore.Name
	}
	id, err := a.m.start(ctx, "download", name, in.Item)
	if err != nil {
		return adapters.RestoreItemActionOutput{}, err
	}
	return adapters.RestoreItemActionOutput{UpdatedItem: in.Item, OperationID: id}, nil
}

func (a restoreAction) Progress(ctx context.Context, id string, _ *restoreObject) (operations.Progress, error) {
	return a.m.progress(ctx, id)
}

func (a restoreAction) Cancel(ctx context.Context, id string, _ *restoreObject) error {
	return a.m.cancel(ctx, id)
}

func (restoreAction) AreAdditionalItemsReady(ctx context.Context, _ []operations.ResourceIdentifier, _ *restoreObject) (bool, error) {
	return ctx.Err() == nil, ctx.Err()
}

// labeler is a v1 backup item action, served to the host through the v1 adapter: it
// labels every namespaced item with the backup's name, synchronously.
type labeler struct{}

var _ adapters.BackupItemActionV1[*backupObject] = labeler{}

func (labeler) AppliesTo() (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{}, nil
}

func (labeler) Execute(item runtime.Unstructured, b *backupObject) (runtime.Unstructured, []operations.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok || u.GetNamespace() == "" || b == nil {
		return item, nil, nil
	}
	u = u.DeepCopy()
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["demo.itemops.io/backup"] = b.Name
	u.SetLabels(labels)
	return u, nil, nil
}

// newRegistry registers the demo's plugins. The lookups hand the plugins a backup or
// restore object made from the owner's name; the demo's plugins need nothing more.
func newRegistry(m *mover) (*adapters.Registry[*backupObject, *restoreObject], error) {
	reg := adapters.NewRegistry(
		func(ctx context.Context, o operations.Owner) (*backupObject, error) {
			return &backupObject{Name: o.Name}, ctx.Err()
		},
		func(ctx context.Context, o operations.Owner) (*restoreObject, error) {
			return &restoreObject{Name: o.Name}, ctx.Err()
		})
	err := errors.Join(
		reg.RegisterBackupItemActionV1(labelerName, labeler{}),
		reg.RegisterBackupItemAction(backupAction{m}),
		reg.RegisterRestoreItemAction(restoreAction{m}),
	)
	return reg, err
}
