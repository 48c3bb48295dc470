package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// ANSI escape sequences the terminal display uses.
const (
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
	ansiClearDown  = "\x1b[J" // erase from the cursor to the end of the screen
	ansiReset      = "\x1b[0m"
	ansiBold       = "\x1b[1m"
	ansiRed        = "\x1b[31m"
	ansiGreen      = "\x1b[32m"
	ansiYellow     = "\x1b[33m"
	ansiCyan       = "\x1b[36m"
)

// maxBars is how many operations get a progress bar of their own on a terminal.
const maxBars = 8

// A display shows what the demo does, read from the store: each phase change of the runs
// it watches and each operation that ends, as a line, as they happen; and the progress
// of the runs under way. On a terminal the progress is a live region of bars below the
// lines, redrawn in place with ANSI escape codes: the items of the run in its main run,
// and one bar per running operation, with units and rate. Elsewhere it is a plain line
// per run every second.
//
// A display is safe for concurrent use.
type display struct {
	out   io.Writer
	term  bool // draw a live region
	color bool
	width func() int
	start time.Time
	store operations.Store

	// mu guards the fields below and every write to out.
	mu        sync.Mutex
	watched   []operations.Owner
	runs      map[operations.Owner]operations.Run
	ops       map[operations.Owner][]operations.Operation
	seen      map[operations.Owner]int // history entries shown
	opPhases  map[operations.Owner]map[string]operations.OperationPhase
	drawn     int // lines of the live region on the screen
	lastPlain time.Time
	stopped   bool
}

func newDisplay(out io.Writer, term bool, width func() int, store operations.Store) *display {
	return &display{
		out:      out,
		term:     term,
		color:    term && os.Getenv("NO_COLOR") == "",
		width:    width,
		start:    time.Now(),
		store:    store,
		runs:     map[operations.Owner]operations.Run{},
		ops:      map[operations.Owner][]operations.Operation{},
		seen:     map[operations.Owner]int{},
		opPhases: map[operations.Owner]map[string]operations.OperationPhase{},
	}
}

// stamp is the time since the demo started, which every line begins with.
func (d *display) stamp() string {
	return fmt.Sprintf("%7s", "+"+seconds(time.Since(d.start)))
}

// watch starts showing the run of o: its phase changes from now on, its operations, its
// progress.
func (d *display) watch(ctx context.Context, o operations.Owner) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.Contains(d.watched, o) {
		return
	}
	d.watched = append(d.watched, o)
	phases := map[string]operations.OperationPhase{}
	if r, err := d.store.GetRun(ctx, o); err == nil {
		d.seen[o] = len(r.History)
		d.runs[o] = r
	}
	if ops, err := d.store.ListOperations(ctx, o, operations.OperationFilter{}); err == nil {
		for _, op := range ops {
			phases[op.ID] = op.Status.Phase
		}
		d.ops[o] = ops
	}
	d.opPhases[o] = phases
}

// printf shows a line, after the events that happened before it.
func (d *display) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopped {
		d.poll(context.Background())
	}
	d.line(fmt.Sprintf("%s  %s", d.stamp(), clean(fmt.Sprintf(format, args...))))
	d.redraw()
}

// run refreshes the display every interval until ctx ends.
func (d *display) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.refresh(ctx)
		}
	}
}

// refresh shows what changed in the store, and the progress.
func (d *display) refresh(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.poll(ctx)
	if d.term {
		d.redraw()
		return
	}
	if time.Since(d.lastPlain) >= time.Second {
		d.lastPlain = time.Now()
		for _, o := range d.watched {
			if s := d.status(o); s != "" {
				d.line(s)
			}
		}
	}
}

// stop shows the last events and removes the live region; the display shows nothing
// after it.
func (d *display) stop(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	d.poll(ctx)
	d.stopped = true
	d.redraw()
	if d.term {
		io.WriteString(d.out, ansiShowCursor)
	}
}

// abort removes the live region at once, before the process ends abruptly.
func (d *display) abort() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.redraw()
	if d.term {
		io.WriteString(d.out, ansiShowCursor)
	}
}

// poll reads the watched runs and their operations, and shows their new phase changes
// and the operations that ended since the last poll. A read that fails is retried at
// the next poll.
func (d *display) poll(ctx context.Context) {
	for _, o := range d.watched {
		r, err := d.store.GetRun(ctx, o)
		if err != nil {
			continue
		}
		ops, err := d.store.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			continue
		}
		// Operations that ended are shown before the phase change they caused.
		for _, op := range ops {
			before, known := d.opPhases[o][op.ID]
			d.opPhases[o][op.ID] = op.Status.Phase
			if known && before.Finished() || !op.Status.Phase.Finished() {
				continue
			}
			d.line(d.opLine(op))
		}
		for _, tr := range r.History[min(d.seen[o], len(r.History)):] {
			d.line(d.transitionLine(o, tr))
		}
		d.seen[o] = len(r.History)
		d.runs[o], d.ops[o] = r, ops
	}
}

// transitionLine shows a phase change.
func (d *display) transitionLine(o operations.Owner, tr operations.Transition) string {
	if tr.Event == operations.EventCancelRequested {
		return fmt.Sprintf("%s  %-11s %s: cancel requested (%s)", d.stamp(), clean(o.Name), tr.From, clean(tr.Reason))
	}
	to := string(tr.To)
	if d.color {
		to = phaseColor(tr.To) + to + ansiReset
	}
	s := fmt.Sprintf("%s  %-11s %s → %s", d.stamp(), clean(o.Name), tr.From, to)
	if tr.Reason != "" {
		s += "  (" + clean(tr.Reason) + ")"
	}
	return s
}

// opLine shows an operation that ended.
func (d *display) opLine(op operations.Operation) string {
	st := op.Status
	took := ""
	if !st.Started.IsZero() && st.Updated.After(st.Started) {
		took = " in " + seconds(st.Updated.Sub(st.Started))
	}
	mark, what := "✓", fmt.Sprintf("%s, %s%s", string(st.Phase), amount(st.NCompleted, st.OperationUnits), took)
	if st.Phase == operations.OperationFailed {
		mark, what = "✗", fmt.Sprintf("Failed, after %s of %s: %s", amount(st.NCompleted, st.OperationUnits), amount(st.NTotal, st.OperationUnits), clean(st.Error))
	}
	if d.color {
		color := ansiGreen
		if st.Phase == operations.OperationFailed {
			color = ansiRed
		}
		mark = color + mark + ansiReset
	}
	return fmt.Sprintf("%s  %-11s %s %s %s: %s", d.stamp(), clean(op.Owner.Name), mark, verbOf(op.ID), clean(op.Resource.Namespace+"/"+op.Resource.Name), what)
}

// verbOf names what an operation does, from the demo's operation IDs.
func verbOf(id string) string {
	if j, ok := parseJob(id); ok {
		return j.verb
	}
	return "operation"
}

// phaseColor is the color a phase is shown in.
func phaseColor(p phase.Phase) string {
	switch {
	case p == phase.Completed:
		return ansiGreen + ansiBold
	case p == phase.Failed || p == phase.FailedValidation:
		return ansiRed + ansiBold
	case phase.IsPartiallyFailed(p):
		return ansiYellow
	}
	return ansiCyan
}

// line writes one line above the live region.
func (d *display) line(s string) {
	if d.term {
		d.clear()
	}
	io.WriteString(d.out, s+"\n")
}

// clear removes the live region; the cursor is left where it began.
func (d *display) clear() {
	if d.drawn > 0 {
		fmt.Fprintf(d.out, "\r\x1b[%dA%s", d.drawn, ansiClearDown)
		d.drawn = 0
	}
}

// redraw draws the live region again below the lines (on a terminal only).
func (d *display) redraw() {
	if !d.term {
		return
	}
	d.clear()
	if d.stopped {
		return
	}
	lines := d.region()
	if len(lines) == 0 {
		return
	}
	width := d.width() - 1
	var b strings.Builder
	b.WriteString(ansiHideCursor)
	for _, l := range lines {
		b.WriteString(truncate(l, width))
		b.WriteString("\n")
	}
	io.WriteString(d.out, b.String())
	d.drawn = len(lines)
}

// region returns the lines of the live region: for each watched run under way, a line
// with its phase and a bar of its items (in its main run) or of its operations, then a
// bar for each of its running operations.
func (d *display) region() []string {
	var lines []string
	bars := 0
	for _, o := range d.watched {
		r, ok := d.runs[o]
		if !ok || phase.IsTerminal(r.Phase) {
			continue
		}
		ops := d.ops[o]
		var head string
		switch {
		case r.Phase == phase.InProgress || r.Phase == phase.New:
			elapsed := time.Duration(0)
			if !r.Started.IsZero() {
				elapsed = time.Since(r.Started)
			}
			head = fmt.Sprintf("%s  %s  items %s %d/%d  %s", clean(o.Name), r.Phase,
				bar(fraction(int64(r.ItemsDone), int64(r.ItemsTotal)), 30), r.ItemsDone, r.ItemsTotal,
				rate(int64(r.ItemsDone), elapsed, "items"))
		default:
			ended := 0
			for _, op := range ops {
				if op.Status.Phase.Finished() {
					ended++
				}
			}
			head = fmt.Sprintf("%s  %s  %d of %s ended", clean(o.Name), r.Phase, ended, plural(len(ops), "operation"))
		}
		lines = append(lines, head)
		hidden := 0
		for _, op := range ops {
			if op.Status.Phase.Finished() {
				continue
			}
			if bars == maxBars {
				hidden++
				continue
			}
			bars++
			lines = append(lines, opBar(op))
		}
		if hidden > 0 {
			lines = append(lines, fmt.Sprintf("  … and %d more operations running", hidden))
		}
	}
	return lines
}

// opBar shows a running operation: what and where, a bar, the share done, the amount
// moved and the rate.
func opBar(op operations.Operation) string {
	st := op.Status
	var elapsed time.Duration
	if !st.Started.IsZero() && st.Updated.After(st.Started) {
		elapsed = st.Updated.Sub(st.Started)
	}
	where := truncate(clean(op.Resource.Namespace+"/"+op.Resource.Name), 22)
	if st.NTotal == 0 {
		return fmt.Sprintf("  %-8s %-22s %s  started, no progress reported yet", verbOf(op.ID), where, bar(0, 20))
	}
	desc := st.Description
	if desc == "" {
		desc = string(st.Phase)
	}
	return fmt.Sprintf("  %-8s %-22s %s %3.0f%%  %s / %s  %s  %s",
		verbOf(op.ID), where, bar(fraction(st.NCompleted, st.NTotal), 20), 100*fraction(st.NCompleted, st.NTotal),
		amount(st.NCompleted, st.OperationUnits), amount(st.NTotal, st.OperationUnits),
		rate(st.NCompleted, elapsed, st.OperationUnits), desc)
}

// status is the plain line that shows the progress of the run of o, or "" when it is not
// under way.
func (d *display) status(o operations.Owner) string {
	r, ok := d.runs[o]
	if !ok || phase.IsTerminal(r.Phase) {
		return ""
	}
	if r.Phase == phase.InProgress || r.Phase == phase.New {
		var elapsed time.Duration
		if !r.Started.IsZero() {
			elapsed = time.Since(r.Started)
		}
		return fmt.Sprintf("%s  %-11s %s: %d/%d items (%s)", d.stamp(), clean(o.Name), r.Phase, r.ItemsDone, r.ItemsTotal,
			rate(int64(r.ItemsDone), elapsed, "items"))
	}
	var (
		running          int
		moved, total     int64
		units            string
		earliest, latest time.Time
	)
	for _, op := range d.ops[o] {
		st := op.Status
		if !st.Phase.Finished() {
			running++
		}
		moved += st.NCompleted
		total += st.NTotal
		units = st.OperationUnits
		if !st.Started.IsZero() && (earliest.IsZero() || st.Started.Before(earliest)) {
			earliest = st.Started
		}
		if st.Updated.After(latest) {
			latest = st.Updated
		}
	}
	s := fmt.Sprintf("%s  %-11s %s: %d of %s running", d.stamp(), clean(o.Name), r.Phase, running, plural(len(d.ops[o]), "operation"))
	if total > 0 {
		s += fmt.Sprintf(", %s of %s moved (%s)", amount(moved, units), amount(total, units), rate(moved, latest.Sub(earliest), units))
	}
	return s
}
