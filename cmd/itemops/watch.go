package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// runWatch shows a run as it moves until it ends or the process is interrupted.
func runWatch(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, args, stdout, stderr)
}

// watch parses the flags of watch and shows the run until it ends or ctx is done; see
// watchRun.
func watch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("watch", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops watch [-kind backup|restore|KIND] [-interval D] [store flags] STORE RUN")
		fmt.Fprintln(stderr, "\nshows the run RUN of STORE as it moves: its phase, history and operations, read again")
		fmt.Fprintln(stderr, "every -interval, until the run ends (Completed, PartiallyFailed, Failed) or the command")
		fmt.Fprintln(stderr, "is interrupted. On a terminal it redraws the run in place; elsewhere it prints a line")
		fmt.Fprintln(stderr, "for each change of the run and of each operation. A boltstore file is opened for each")
		fmt.Fprint(stderr, "read and closed after it, as its writer's lock allows (the writer holds it while open).\n\n")
		fmt.Fprint(stderr, storeUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	kind := fs.String("kind", "", "the run's `kind`: backup, restore, or the name of a kind of one's own; needed only when runs of several kinds share the name")
	interval := fs.Duration("interval", time.Second, "how often the run is read")
	sf := addStoreFlags(fs)
	if err := parseArgs(fs, args, 2, "STORE and RUN"); err != nil {
		return err
	}
	if *interval <= 0 {
		return usageError{fmt.Sprintf("-interval %s: want more than 0", *interval)}
	}
	sn, err := parseStoreName(fs.Arg(0))
	if err != nil {
		return usageError{err.Error()}
	}
	var want phase.Kind
	if *kind != "" {
		k, err := phase.ParseKind(*kind)
		if err != nil && phase.Kind(*kind).Validate() != nil {
			return usageError{fmt.Sprintf("-kind %q: want backup, restore, or the name of a kind (letters and digits)", *kind)}
		}
		want = cmp.Or(k, phase.Kind(*kind))
	}
	term, _ := terminal(stdout)
	w := &watcher{out: stdout, term: term, interval: *interval, name: fs.Arg(1), kind: want}
	if sn.kind == boltStore {
		return w.run(ctx, func(ctx context.Context, read func(operations.Store) error) error {
			s, err := boltstore.Open(sn.path, &boltstore.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer s.Close()
			return read(s)
		})
	}
	s, err := openNamed(ctx, sn, sf, forReading)
	if err != nil {
		return err
	}
	defer s.Close()
	return w.run(ctx, func(_ context.Context, read func(operations.Store) error) error { return read(s) })
}

// A watcher shows one run as it moves, to out: redrawn in place on a terminal, as a
// line per change elsewhere.
type watcher struct {
	out      io.Writer
	term     bool
	interval time.Duration
	name     string
	kind     phase.Kind // empty: found by name

	owner operations.Owner // the run, once found
	// last and lastOps are what the previous read showed, so that only changes print.
	last    string
	lastOps map[string]string
	drawn   bool
}

// run reads the run through with every interval and shows it, until the run ends (nil),
// ctx is done (nil: the user stopped watching), or a read fails. A boltstore that its
// writer holds locked is shown as such and read again at the next interval.
func (w *watcher) run(ctx context.Context, with func(context.Context, func(operations.Store) error) error) error {
	for {
		var (
			r   operations.Run
			ops []operations.Operation
		)
		err := with(ctx, func(s operations.Store) error {
			var err error
			if w.owner.Name == "" {
				if w.owner, err = findRun(ctx, s, w.name, w.kind); err != nil {
					return err
				}
			}
			if r, err = s.GetRun(ctx, w.owner); err != nil {
				return err
			}
			ops, err = s.ListOperations(ctx, w.owner, operations.OperationFilter{})
			return err
		})
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, boltstore.ErrLocked):
			w.show(fmt.Sprintf("%s: the store is locked by a process that writes to it; reading again every %s", clean(w.name), w.interval), nil, nil)
		case err != nil:
			return err
		default:
			w.showRun(r, ops)
			if phase.IsTerminal(r.Phase) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
	}
}

// showRun shows the run r with its operations ops.
func (w *watcher) showRun(r operations.Run, ops []operations.Operation) {
	byPhase := map[operations.OperationPhase]int{}
	for _, op := range ops {
		byPhase[op.Status.Phase]++
	}
	summary := fmt.Sprintf("%s %s: %s, items %d/%d, %d errors, %d warnings, %s", cell(string(r.Owner.Kind)), cell(r.Owner.Name),
		cell(string(r.Phase)), r.ItemsDone, r.ItemsTotal, r.Errors, r.Warnings, counts(len(ops), byPhase))
	if r.CancelRequested() && !phase.IsTerminal(r.Phase) {
		summary += ", cancel requested: " + cell(r.Cancel.Reason)
	}
	if r.FailureReason != "" {
		summary += ", failure reason: " + cell(r.FailureReason)
	}
	w.show(summary, &r, ops)
}

// show prints what changed since the last read: on a terminal, the whole run again in
// place of the last; elsewhere, the summary line when it changed, and a line for each
// operation whose phase, progress or error changed.
func (w *watcher) show(summary string, r *operations.Run, ops []operations.Operation) {
	at := now()
	if w.term {
		var out bytes.Buffer
		if w.drawn {
			out.WriteString("\x1b[H\x1b[2J") // home, clear the screen
		}
		fmt.Fprintf(&out, "%s\n", summary)
		if r != nil {
			out.WriteByte('\n')
			writeRun(&out, *r, ops, at)
		}
		fmt.Fprintf(&out, "\n(every %s; Ctrl-C stops watching)\n", w.interval)
		w.out.Write(out.Bytes())
		w.drawn = true
		return
	}
	var out bytes.Buffer
	if summary != w.last {
		fmt.Fprintf(&out, "%s\n", summary)
		w.last = summary
	}
	if w.lastOps == nil {
		w.lastOps = map[string]string{}
	}
	for _, op := range ops {
		line := strings.Join([]string{string(op.Status.Phase), progressText(op.Status), errorText(op)}, " ")
		key := op.Action + "\x00" + op.ID
		if w.lastOps[key] == line {
			continue
		}
		w.lastOps[key] = line
		// The plugin, the resource when there is one, and the operation ID name it.
		who := []string{cell(op.Action)}
		if res := strings.TrimSpace(op.Resource.String()); res != "" {
			who = append(who, clean(res))
		}
		who = append(who, cell(op.ID))
		fmt.Fprintf(&out, "  %s: %s %s", strings.Join(who, " "), cell(string(op.Status.Phase)), progressText(op.Status))
		if e := errorText(op); e != "" && e != "-" {
			fmt.Fprintf(&out, " (%s)", e)
		}
		out.WriteByte('\n')
	}
	w.out.Write(out.Bytes())
}

// findRun returns the owner of the run named name in s: of kind, when it is not empty,
// else of whichever kind holds a run of that name, which must be one. It fails when
// there is none, or with a usageError when several kinds hold one.
func findRun(ctx context.Context, s operations.Store, name string, kind phase.Kind) (operations.Owner, error) {
	if kind != "" {
		o := operations.Owner{Kind: kind, Name: name}
		if _, err := s.GetRun(ctx, o); err != nil {
			return operations.Owner{}, err
		}
		return o, nil
	}
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return operations.Owner{}, err
	}
	var found []operations.Owner
	for _, r := range runs {
		if r.Owner.Name == name {
			found = append(found, operations.Owner{Kind: r.Owner.Kind, Name: name})
		}
	}
	switch len(found) {
	case 0:
		return operations.Owner{}, fmt.Errorf("no run named %q", name)
	case 1:
		return found[0], nil
	}
	kinds := make([]string, len(found))
	for i, o := range found {
		kinds[i] = string(o.Kind)
	}
	return operations.Owner{}, usageError{fmt.Sprintf("runs of %d kinds are named %q (%s): say which with -kind", len(found), name, strings.Join(kinds, ", "))}
}
