package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// runCancel records a cancel request for a run of a boltstore file. The Monitor that
// works on the store honours it on its next pass: it cancels the run's unfinished
// operations and moves the run to Failed.
func runCancel(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cancel", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops cancel [-kind backup|restore|KIND] [-reason TEXT] [store flags] STORE RUN")
		fmt.Fprintln(stderr, "\nrecords a request to cancel the run RUN of STORE; the Monitor that works on the store")
		fmt.Fprint(stderr, "cancels its operations and fails it on its next pass. A request cannot be withdrawn.\n\n")
		fmt.Fprint(stderr, storeUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	kind := fs.String("kind", "", "the run's `kind`: backup, restore, or the name of a kind of one's own (DatabaseSnapshot); needed only when runs of several kinds share the name")
	reason := fs.String("reason", "cancelled from the command line", "who asks and why; becomes the run's failure reason")
	sf := addStoreFlags(fs)
	if err := parseArgs(fs, args, 2, "STORE and RUN"); err != nil {
		return err
	}
	sn, err := parseStoreName(fs.Arg(0))
	if err != nil {
		return usageError{err.Error()}
	}
	db, name := sn.String(), fs.Arg(1)
	var want phase.Kind // empty: any kind
	if *kind != "" {
		k, err := phase.ParseKind(*kind)
		if err != nil && phase.Kind(*kind).Validate() != nil {
			return usageError{fmt.Sprintf("-kind %q: want backup, restore, or the name of a kind (letters and digits)", *kind)}
		}
		want = cmp.Or(k, phase.Kind(*kind))
	}
	ctx := context.Background()
	var s operations.Store
	if sn.kind == boltStore {
		// cancel changes a store; it never creates one. The hook closes the window in
		// which the file could vanish after the Lstat: bbolt then fails to open it.
		if _, err := os.Lstat(sn.path); err != nil {
			return fmt.Errorf("%w (cancel changes an existing store, it never creates one)", err)
		}
		bs, err := boltstore.Open(sn.path, &boltstore.Options{NoInit: true, OpenFile: openExisting})
		if errors.Is(err, boltstore.ErrLocked) {
			return fmt.Errorf("%w; another process has the store open (a demo running on it?)", err)
		}
		if err != nil {
			return err
		}
		defer bs.Close()
		s = bs
	} else {
		named, err := openNamed(ctx, sn, sf, forWriting)
		if err != nil {
			return err
		}
		defer named.Close()
		s = named
	}
	kinds := []phase.Kind{phase.Backup, phase.Restore}
	if want != "" {
		kinds = []phase.Kind{want}
	}
	var found []operations.Owner
	for _, k := range kinds {
		o := operations.Owner{Kind: k, Name: name}
		if _, err := s.GetRun(ctx, o); err == nil {
			found = append(found, o)
		} else if !errors.Is(err, operations.ErrNotFound) {
			return err
		}
	}
	if want == "" {
		// Runs of kinds of one's own are found by a listing. A store too damaged to list
		// may still cancel the Backup or Restore found above.
		runs, err := s.ListRuns(ctx, operations.RunFilter{})
		if err != nil && len(found) == 0 {
			return err
		}
		for _, r := range runs {
			if r.Owner.Name == name && r.Owner.Kind != phase.Backup && r.Owner.Kind != phase.Restore {
				found = append(found, operations.Owner{Kind: r.Owner.Kind, Name: name})
			}
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("%s has no run %q", clean(db), name)
	case 1:
	case 2:
		if found[0].Kind == phase.Backup && found[1].Kind == phase.Restore {
			return usageError{fmt.Sprintf("both a backup and a restore are named %q: say which with -kind", name)}
		}
		fallthrough
	default:
		kinds := make([]string, len(found))
		for i, o := range found {
			kinds[i] = string(o.Kind)
		}
		return usageError{fmt.Sprintf("runs of %d kinds are named %q (%s): say which with -kind", len(found), name, strings.Join(kinds, ", "))}
	}
	r, err := operations.RequestCancel(ctx, s, found[0], *reason, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: cancel requested (%s); it is %s, and the Monitor fails it on its next pass\n", clean(string(r.Owner.Kind)), clean(r.Owner.Name), clean(r.Cancel.Reason), clean(string(r.Phase)))
	return nil
}

// openExisting opens a file as os.OpenFile does, but never creates it.
func openExisting(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag&^os.O_CREATE, perm)
}
