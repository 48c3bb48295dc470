package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// runCheck checks a boltstore file: every page (bbolt's own check), then every run and
// operation read back. It prints one line and fails when anything is damaged.
func runCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: itemops check DB") }
	if err := parseArgs(fs, args, 1, "one DB"); err != nil {
		return err
	}
	name := fs.Arg(0)
	s, err := boltstore.Open(name, &boltstore.Options{ReadOnly: true, Check: true})
	if err != nil {
		return err
	}
	defer s.Close()
	got := readAll(context.Background(), s)
	if len(got.lost) > 0 {
		return fmt.Errorf("%s is damaged: %d runs and %d operations read, but %s", name, len(got.runs), got.ops, errors.Join(got.lost...))
	}
	fmt.Fprintf(stdout, "%s: sound; %d runs, %d operations\n", clean(name), len(got.runs), got.ops)
	return nil
}

// runSalvage copies every run and operation that can still be read from a damaged
// boltstore file into a new one, and lists what could not be read, and the damage the
// check of the file found; it fails (exit status 1) when either is not empty. It opens
// a damaged file without boltstore's check, which would refuse it, and runs the check
// itself. A file whose pages are reached twice (a cycle, which bbolt's reads would follow
// forever) it refuses, saving nothing, with the check's finding.
func runSalvage(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("salvage", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: itemops salvage DB NEW") }
	if err := parseArgs(fs, args, 2, "DB and NEW"); err != nil {
		return err
	}
	from, to := fs.Arg(0), fs.Arg(1)
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists; salvage writes a new file", to)
	}
	// A file whose pages are reached twice (a cycle) can make bbolt's own reads loop or
	// overflow the stack: only the check may read it, and it finds that first.
	src, err := boltstore.Open(from, &boltstore.Options{ReadOnly: true, Check: true})
	switch {
	case errors.Is(err, boltstore.ErrPageReachedTwice):
		return fmt.Errorf("%w; salvage read nothing, since reading through such pages never ends", err)
	case err != nil:
		src, err = boltstore.Open(from, &boltstore.Options{ReadOnly: true})
		if err != nil {
			return err
		}
	}
	defer src.Close()
	ctx := context.Background()
	// The check says what reads cannot: a rolled-back last transaction, a damaged
	// freelist, a lost page. Salvage goes on to copy what it can.
	damage := src.Check(ctx)
	dst, err := boltstore.Open(to, nil)
	if err != nil {
		return err
	}
	defer dst.Close()
	got := readAll(ctx, src)
	saved := 0
	for _, r := range got.runs {
		if err := dst.CreateRunWithOperations(ctx, r.run, r.ops); err != nil {
			got.lost = append(got.lost, fmt.Errorf("run %s: %w", r.run.Owner, err))
			continue
		}
		saved += len(r.ops)
	}
	fmt.Fprintf(stdout, "%s: saved %d runs and %d operations from %s\n", to, len(got.runs), saved, from)
	if damage != nil {
		fmt.Fprintf(stdout, "damaged: %v\n", damage)
	}
	for _, err := range got.lost {
		fmt.Fprintf(stdout, "lost: %v\n", err)
	}
	switch {
	case len(got.lost) > 0:
		return fmt.Errorf("%d records or groups of records could not be read from %s", len(got.lost), from)
	case damage != nil:
		return fmt.Errorf("%s is damaged, so records may be missing that no read could see; what could be read was saved", from)
	}
	return nil
}

type readRun struct {
	run operations.Run
	ops []operations.Operation
}

type readResult struct {
	runs []readRun
	ops  int
	lost []error
}

// readAll reads every run of s and its operations, going on past what cannot be read:
// when the list of all runs fails, the runs are listed by kind and phase, so that one
// damaged record costs as little as it can.
func readAll(ctx context.Context, s operations.Store) readResult {
	var res readResult
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		res.lost = append(res.lost, fmt.Errorf("listing all runs: %w", err))
		seen := map[operations.Owner]bool{}
		runs = nil
		// The empty kind lists every kind: it finds the runs of kinds of one's own, whose
		// names only a listing tells.
		for _, kind := range []phase.Kind{phase.Backup, phase.Restore, ""} {
			for _, p := range phase.Phases() {
				some, err := s.ListRuns(ctx, operations.RunFilter{Kind: kind, Phases: []phase.Phase{p}})
				if err != nil {
					res.lost = append(res.lost, fmt.Errorf("%s runs in %s: %w", cmp.Or(kind, "all"), p, err))
					continue
				}
				for _, r := range some {
					if k := (operations.Owner{Kind: r.Owner.Kind, Name: r.Owner.Name}); !seen[k] {
						seen[k] = true
						runs = append(runs, r)
					}
				}
			}
		}
	}
	for _, r := range runs {
		ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		if err != nil {
			res.lost = append(res.lost, fmt.Errorf("operations of %s: %w", r.Owner, err))
			ops = nil
		}
		res.runs = append(res.runs, readRun{r, ops})
		res.ops += len(ops)
	}
	return res
}
