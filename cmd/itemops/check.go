package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf16"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/kubestore"
)

// runCheck checks a store: for a boltstore file, every page (bbolt's own check), then
// every run and operation read back; for an etcd store, every run and operation read
// through the store; for a kubestore, those, and every object of the namespace
// (kubestore's Store.Check). It prints one line and fails when anything is damaged.
func runCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops check [store flags] STORE")
		fmt.Fprintln(stderr, "\nchecks a store and prints one line: that it is sound, or what is damaged (exit status 1).")
		fmt.Fprintln(stderr, "A boltstore file: every page and every record, each against its checksum. An etcd store:")
		fmt.Fprintln(stderr, "every run and every operation, read through the store, each against its checksum. A")
		fmt.Fprintln(stderr, "kubestore: the same, and every object of the namespace, as the store reads it: its two")
		fmt.Fprintln(stderr, "markers; each ItemopsRun on its own, against its sum (labels included); each chunk that")
		fmt.Fprintln(stderr, "a run names, against the SHA-256 the run gives; the labels and ownerReference of every")
		fmt.Fprintln(stderr, "ItemopsChunk. A chunk that no run names (saying whether a sweep deletes it; not one that")
		fmt.Fprintln(stderr, "a commit under way may yet name), a pending run object older than a minute and an")
		fmt.Fprintln(stderr, "object the store did not name are damage too. The line counts the run objects and")
		fmt.Fprintln(stderr, "chunks (and the pending objects, when there are any).")
		fmt.Fprintln(stderr, "check changes nothing: it opens a kubestore read-only, with no sweep, so that it reports")
		fmt.Fprintln(stderr, "what writers left half done rather than delete it, and needs only get and list there.")
		fmt.Fprintln(stderr)
		fmt.Fprint(stderr, storeUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	sf := addStoreFlags(fs)
	if err := parseArgs(fs, args, 1, "one STORE"); err != nil {
		return err
	}
	n, err := parseStoreName(fs.Arg(0))
	if err != nil {
		return usageError{err.Error()}
	}
	if n.kind != boltStore {
		return checkNamed(context.Background(), n, sf, stdout)
	}
	name := n.path
	s, err := boltstore.Open(name, &boltstore.Options{ReadOnly: true})
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

// checkNamed checks the etcd store or kubestore n names; see runCheck.
func checkNamed(ctx context.Context, n storeName, sf *storeFlags, stdout io.Writer) error {
	s, err := openNamed(ctx, n, sf, forReading)
	if err != nil {
		return err
	}
	defer s.Close()
	got := readAll(ctx, s)
	objects := ""
	if ks, ok := s.Store.(*kubestore.Store); ok {
		rep, err := ks.Check(ctx)
		if err != nil {
			got.lost = append(got.lost, err)
		}
		objects = fmt.Sprintf(" (%s, %s)", plural(rep.Runs, "run object"), plural(rep.Chunks, "chunk"))
		if rep.Pending > 0 {
			objects = fmt.Sprintf(" (%s, %s, %s)", plural(rep.Runs, "run object"), plural(rep.Pending, "pending object"), plural(rep.Chunks, "chunk"))
		}
	}
	if len(got.lost) > 0 {
		return fmt.Errorf("%s is damaged: %d runs and %d operations read, but %s", n, len(got.runs), got.ops, errors.Join(got.lost...))
	}
	fmt.Fprintf(stdout, "%s: sound; %d runs, %d operations%s\n", clean(n.String()), len(got.runs), got.ops, objects)
	return nil
}

// runSalvage copies every run and operation that remains intact in a damaged boltstore
// file into a new one, and says what was lost and what damage was found; see
// salvageUsage.
func runSalvage(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("salvage", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, salvageUsage) }
	asJSON := fs.Bool("json", false, "print the summary as one JSON object instead of lines")
	if err := parseArgs(fs, args, 2, "DB and NEW"); err != nil {
		return err
	}
	from, to := fs.Arg(0), fs.Arg(1)
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists; salvage writes a new file", to)
	}
	ctx := context.Background()
	got, err := boltstore.Salvage(ctx, from)
	if err != nil {
		return err
	}
	sum := salvageSummary{From: from, To: to, Rebuilt: []salvageRebuilt{}, Lost: []salvageLoss{}, Damage: append([]string{}, got.Damage...)}
	for _, l := range got.Lost {
		sum.Lost = append(sum.Lost, salvageLoss{Run: ownerText(l.Owner), Operation: l.ID, Why: l.Why})
	}
	err = boltstore.Build(to, func(dst *boltstore.Store) error {
		for _, r := range got.Runs {
			if err := dst.CreateRunWithOperations(ctx, r.Run, r.Operations); err != nil {
				sum.Lost = append(sum.Lost, salvageLoss{Run: ownerText(r.Run.Owner), Why: fmt.Sprintf("it was read with %d operations, but could not be written: %v", len(r.Operations), err)})
				continue
			}
			sum.Saved.Runs++
			sum.Saved.Operations += len(r.Operations)
			if r.Rebuilt {
				sum.Rebuilt = append(sum.Rebuilt, salvageRebuilt{Run: ownerText(r.Run.Owner), Operations: len(r.Operations)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", jsonForTerminal(b))
	} else {
		fmt.Fprintf(stdout, "%s: saved %d runs and %d operations from %s\n", clean(to), sum.Saved.Runs, sum.Saved.Operations, clean(from))
		for _, d := range sum.Damage {
			fmt.Fprintf(stdout, "damaged: %s\n", clean(d))
		}
		for _, r := range sum.Rebuilt {
			fmt.Fprintf(stdout, "rebuilt: %s\n", clean(r.String()))
		}
		for _, l := range sum.Lost {
			fmt.Fprintf(stdout, "lost: %s\n", clean(l.String()))
		}
	}
	// A rebuilt run's record is lost, though its operations are saved.
	lost := len(sum.Lost) + len(sum.Rebuilt)
	switch {
	case lost > 0 && len(sum.Damage) > 0:
		return fmt.Errorf("%s is damaged (%s): %d records could not be read from it; what could be read was saved", from, sum.Damage[0], lost)
	case lost > 0:
		return fmt.Errorf("%d records could not be read from %s; what could be read was saved", lost, from)
	case len(sum.Damage) > 0:
		return fmt.Errorf("%s is damaged (%s); every record that could be read was saved", from, sum.Damage[0])
	}
	return nil
}

// salvageUsage is salvage's usage text, which documents its output.
const salvageUsage = `usage: itemops salvage [-json] DB NEW

copies every run and operation that remains intact in the boltstore file DB, however
damaged or cut short, into the new store NEW, and says what was lost. DB is read page by
page, without bbolt, and never written; each entry of a store carries a checksum, so an
entry that is read is the one written. A run is saved with those of its operations that
remain, each operation on its own: a run whose operations are partly lost is saved as it
was, with the operations that remain, and each lost one is named. A run whose record
is lost (with its copy in the phase index), some of whose operations remain, is rebuilt
from them and saved as Failed, with a failure reason that says its record was lost and
how many operations were saved: its phase, counts and history are unknown, and Failed
is a terminal phase, which no Monitor polls and nothing reports as Completed. A run of a
kind of one's own is rebuilt only when other runs of its kind remain and agree on its
profile. NEW is written
to a temporary file beside it, synced, and linked into place: an interrupted salvage
leaves no NEW (perhaps a stray .NEW.build-* file), and NEW is never written over.

It prints, on lines:
  NEW: saved R runs and M operations from DB
                         (R and M count the rebuilt runs and their operations too)
  damaged: WHAT          for each damage found in the file
  rebuilt: KIND/NAME: its record was lost; saved as Failed with N operations
                         for each run rebuilt; its record, which is lost, is not
                         also on a lost: line, and its operations are saved
  lost: KIND/NAME operation "ID": WHY
                         for each record that could not be read back (without
                         'operation "ID"' when the record is a run's, or its ID unknown)

With -json it prints one JSON object instead:
  {"from": "DB", "to": "NEW", "saved": {"runs": R, "operations": M},
   "damage": ["WHAT", ...], "rebuilt": [{"run": "KIND/NAME", "operations": N}, ...],
   "lost": [{"run": "KIND/NAME", "operation": "ID", "why": "WHY"}, ...]}
where "damage", "rebuilt" and "lost" are lists, empty when nothing was found, and
"operation" or "run" is "" when unknown. Text from the store is escaped for the
terminal: in lines as visible escapes (\x1b, \u202e), in JSON as \u escapes, which a
JSON reader decodes to the stored text (but for a byte that is not UTF-8, which JSON
cannot hold: it becomes U+FFFD).

Exit status: 0 when the file is sound and everything was saved; 1 when records were lost
(a rebuilt run's record among them) or damage was found (what could be read is saved in
NEW), or when nothing could be read.
A file of schema 1 or 2, whose entries carry no checksums, is refused.
`

// salvageSummary is the -json output of salvage (see salvageUsage).
type salvageSummary struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Saved struct {
		Runs       int `json:"runs"`
		Operations int `json:"operations"`
	} `json:"saved"`
	Damage  []string         `json:"damage"`
	Rebuilt []salvageRebuilt `json:"rebuilt"`
	Lost    []salvageLoss    `json:"lost"`
}

// salvageRebuilt is one run salvage rebuilt from its operations, its record lost.
type salvageRebuilt struct {
	Run        string `json:"run"`
	Operations int    `json:"operations"`
}

// String is the run as a rebuilt: line shows it.
func (r salvageRebuilt) String() string {
	return fmt.Sprintf("%s: its record was lost; saved as Failed with %d operations", r.Run, r.Operations)
}

// salvageLoss is one record salvage lost.
type salvageLoss struct {
	Run       string `json:"run"`
	Operation string `json:"operation"`
	Why       string `json:"why"`
}

// String is the loss as a lost: line shows it.
func (l salvageLoss) String() string {
	s := cmp.Or(l.Run, "a record of an unknown run")
	if l.Operation != "" {
		s += fmt.Sprintf(" operation %q", l.Operation)
	}
	return s + ": " + l.Why
}

// ownerText is o as kind/name, or "" when o is unknown.
func ownerText(o operations.Owner) string {
	if o.Kind == "" {
		return ""
	}
	return o.String()
}

// jsonForTerminal writes each rune of the JSON text b that clean would escape as a \u
// escape of JSON (every such rune is inside a string, as JSON's own characters are
// ASCII), so that the text is safe on a terminal and decodes to the same values.
func jsonForTerminal(b []byte) string {
	var out strings.Builder
	for _, r := range string(b) {
		if !unsafeRune(r) {
			out.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&out, `\u%04x`, u)
		}
	}
	return out.String()
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
// damaged record costs as little as it can. A listing by kind and phase that fails
// as the list of all runs did (a kubestore's, which reads every run's object whatever
// it selects) adds no error of its own.
func readAll(ctx context.Context, s operations.Store) readResult {
	var res readResult
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		first := err.Error()
		res.lost = append(res.lost, fmt.Errorf("listing all runs: %w", err))
		seen := map[operations.Owner]bool{}
		runs = nil
		// The empty kind lists every kind: it finds the runs of kinds of one's own, whose
		// names only a listing tells.
		for _, kind := range []phase.Kind{phase.Backup, phase.Restore, ""} {
			for _, p := range phase.Phases() {
				some, err := s.ListRuns(ctx, operations.RunFilter{Kind: kind, Phases: []phase.Phase{p}})
				if err != nil && err.Error() == first {
					continue
				}
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
