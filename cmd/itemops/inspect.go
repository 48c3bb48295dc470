package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
)

// now is the time ages are measured from; tests replace it.
var now = time.Now

// runInspect prints what a file holds.
func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops inspect [-run NAME] [-o text|json] [store flags] FILE|STORE")
		fmt.Fprintln(stderr, "\nprints the operations of an itemoperations.json.gz file (backup or restore), one per row;")
		fmt.Fprintln(stderr, "or the runs of a store, each with its phase history and its operations (a boltstore")
		fmt.Fprint(stderr, "file is opened read-only, and refused while another process writes to it).\n\n")
		fmt.Fprint(stderr, storeUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	var opts inspectOptions
	fs.StringVar(&opts.run, "run", "", "in a store, show only the run `NAME` (of any kind)")
	format := fs.String("o", "text", "the output `format` of a store's runs: text, or json (one object: the store's name and its runs, each with its operations)")
	sf := addStoreFlags(fs)
	if err := parseArgs(fs, args, 1, "one FILE or STORE"); err != nil {
		return err
	}
	switch *format {
	case "text":
	case "json":
		opts.json = true
	default:
		return usageError{fmt.Sprintf("-o %q: want text or json", *format)}
	}
	n, err := parseStoreName(fs.Arg(0))
	if err != nil {
		return usageError{err.Error()}
	}
	if n.kind != boltStore || n.url {
		ctx := context.Background()
		s, err := openNamed(ctx, n, sf, forReading)
		if err != nil {
			return err
		}
		defer s.Close()
		return printStore(ctx, s, storeTitle(n), opts, stdout)
	}
	name := n.path
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	head, _ := r.Peek(headSize) // a short or unreadable file is left to the inspector to explain
	if !isBolt(head) && !isGzip(head) && boltMeta1(f) {
		// The first page is damaged, but the second meta page says bbolt: the store's
		// check says what is wrong, where the gzip decoder would only say "not gzip".
		head = boltHead
	}
	return inspectorFor(head, opts)(r, name, stdout)
}

// headSize is how many bytes of a file inspectorFor needs to tell its kind.
const headSize = 32

// inspectOptions are the flags of inspect.
type inspectOptions struct {
	run  string // show only the run of this name
	json bool   // print the store's runs as JSON
}

// An inspector prints the file name, read from r, to stdout. It writes nothing when it
// fails.
type inspector func(r io.Reader, name string, stdout io.Writer) error

// inspectorFor chooses how to read a file from its first bytes: a bbolt file is read as
// a boltstore; anything else goes to the itemoperations decoder, whose error says what is
// wrong with it.
func inspectorFor(head []byte, opts inspectOptions) inspector {
	if isBolt(head) {
		return func(_ io.Reader, name string, stdout io.Writer) error {
			return inspectStore(name, opts, stdout)
		}
	}
	if opts.run != "" || opts.json {
		return func(io.Reader, string, io.Writer) error {
			return usageError{"-run and -o json apply to stores only, not to itemoperations files"}
		}
	}
	return inspectOperations
}

// inspectOperations prints an itemoperations.json.gz file: a line naming its kind, owner
// and counts, then a table with a row per operation.
func inspectOperations(r io.Reader, name string, stdout io.Writer) error {
	dec, err := opsfile.NewDecoder(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	at := now()
	var (
		table   bytes.Buffer
		owners  ownerSet
		byPhase = map[operations.OperationPhase]int{}
		total   int
	)
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tRESOURCE\tOPERATION ID\tPHASE\tPROGRESS\tSTARTED\tUPDATED\tERROR")
	for op, err := range dec.All() {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		total++
		byPhase[op.Status.Phase]++
		owners.add(op.Owner)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			cell(op.Action), cell(op.Resource.String()), cell(op.ID), cell(string(op.Status.Phase)),
			progressText(op.Status), age(at, op.Status.Started), age(at, op.Status.Updated), cell(op.Status.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%s: %s\n", header(owners), counts(total, byPhase))
	if total > 0 {
		out.WriteByte('\n')
		out.Write(table.Bytes())
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// maxOwnerNames is how many owners the header of a file of several owners names; it
// counts the others.
const maxOwnerNames = 5

// ownerSet holds the owners of a file's operations: how many there are, and the first
// maxOwnerNames of them, in the order they first appear. Adding an owner costs the same
// however many there are.
type ownerSet struct {
	seen  map[operations.Owner]struct{}
	first []operations.Owner
}

func (s *ownerSet) add(o operations.Owner) {
	if s.seen == nil {
		s.seen = map[operations.Owner]struct{}{}
	}
	if _, ok := s.seen[o]; ok {
		return
	}
	s.seen[o] = struct{}{}
	if len(s.first) < maxOwnerNames {
		s.first = append(s.first, o)
	}
}

// header names what the operations belong to: the owner, or how many owners there are
// and the first few of their names, each made safe for the terminal as a table cell is.
func header(owners ownerSet) string {
	n := len(owners.seen)
	switch n {
	case 0:
		return "empty operations file"
	case 1:
		o := owners.first[0]
		if o.UID == "" {
			return fmt.Sprintf("%s %s", cell(string(o.Kind)), cell(o.Name))
		}
		return fmt.Sprintf("%s %s (UID %s)", cell(string(o.Kind)), cell(o.Name), cell(o.UID))
	}
	names := make([]string, len(owners.first))
	for i, o := range owners.first {
		names[i] = cell(o.Name)
	}
	list := strings.Join(names, ", ")
	if more := n - len(owners.first); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%s operations of %d owners (%s)", cell(string(owners.first[0].Kind)), n, list)
}

// counts says how many operations there are, by phase.
func counts(total int, byPhase map[operations.OperationPhase]int) string {
	s := "1 operation"
	if total != 1 {
		s = fmt.Sprintf("%d operations", total)
	}
	var parts []string
	for _, p := range []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed} {
		if n := byPhase[p]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, p))
		}
	}
	if len(parts) == 0 {
		return s
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}

// progressText shows how far an operation got: "12% of 99999 Bytes", or "-" when the
// plugin reported no total.
func progressText(s operations.Status) string {
	if s.NTotal == 0 {
		return "-"
	}
	pct := math.Floor(float64(s.NCompleted) / float64(s.NTotal) * 100)
	text := fmt.Sprintf("%.0f%% of %d", pct, s.NTotal)
	if s.OperationUnits != "" {
		text += " " + cell(s.OperationUnits)
	}
	return text
}

// age shows how long before at the time t was: "5m3s ago"; "in 10s" for a time after
// at; "-" for the zero time. A distance that a time.Duration cannot hold (over 292
// years) shows as "more than 292 years".
func age(at, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.After(at) {
		d := t.Sub(at)
		if d == math.MaxInt64 {
			return "in more than 292 years"
		}
		return "in " + duration(d)
	}
	d := at.Sub(t)
	if d == math.MaxInt64 {
		return "more than 292 years ago"
	}
	return duration(d) + " ago"
}

// until shows how long after at the time t is: "in 1m20s", or "in <1s" for less than a
// second; "due" once t is not after at; "-" for the zero time.
func until(at, t time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case !t.After(at):
		return "due"
	case t.Sub(at) < time.Second:
		return "in <1s"
	}
	return age(at, t)
}

// duration shows d in its two largest units, to the second: "45s", "5m3s", "3h", "2d4h".
func duration(d time.Duration) string {
	s := int64(d / time.Second)
	days, hours, minutes, seconds := s/86400, s/3600%24, s/60%60, s%60
	two := func(a int64, au string, b int64, bu string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, au)
		}
		return fmt.Sprintf("%d%s%d%s", a, au, b, bu)
	}
	switch {
	case days > 0:
		return two(days, "d", hours, "h")
	case hours > 0:
		return two(hours, "h", minutes, "m")
	case minutes > 0:
		return two(minutes, "m", seconds, "s")
	}
	return fmt.Sprintf("%ds", seconds)
}

// cell makes s safe for one table cell: clean escapes what would break the columns or
// reach the terminal raw, and the empty string becomes "-".
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}
