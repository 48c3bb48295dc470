package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// boltMagic is the number a bbolt file's first page holds after its 16-byte page header.
const boltMagic = 0xED0CDAED

// isBolt reports whether a file that begins with head is a bbolt file, in either byte
// order.
func isBolt(head []byte) bool {
	if len(head) < 20 {
		return false
	}
	return binary.LittleEndian.Uint32(head[16:20]) == boltMagic || binary.BigEndian.Uint32(head[16:20]) == boltMagic
}

// isGzip reports whether a file that begins with head is gzip data.
func isGzip(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

// boltHead is the head of a bbolt file, for inspectorFor.
var boltHead = binary.LittleEndian.AppendUint32(make([]byte, 16), boltMagic)

// boltMeta1 reports whether f holds bbolt's second meta page where a page size bbolt
// may use puts it (1 KiB to 64 KiB), as a bbolt file whose first page was damaged does.
func boltMeta1(f io.ReaderAt) bool {
	var head [20]byte
	for size := int64(1024); size <= 64<<10; size <<= 1 {
		_, err := f.ReadAt(head[:], size)
		if err == nil && isBolt(head[:]) && (binary.LittleEndian.Uint64(head[:]) == 1 || binary.BigEndian.Uint64(head[:]) == 1) {
			return true
		}
	}
	return false
}

// inspectStore prints the runs of the boltstore file name: a line of counts, a table of
// the runs, then each run with its phase history and its operations.
func inspectStore(name string, opts inspectOptions, stdout io.Writer) error {
	s, err := boltstore.Open(name, &boltstore.Options{ReadOnly: true})
	if errors.Is(err, boltstore.ErrLocked) {
		return fmt.Errorf("%w; another process is writing to the store (a demo running on it?): inspect it once that process has stopped", err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	return printStore(context.Background(), s, "boltstore "+name, opts, stdout)
}

// printStore prints the runs of s, which title names (as "boltstore demo.db"): a line
// of counts, a table of the runs, then each run with its phase history and its
// operations; or, with opts.json, one JSON object of the runs and their operations. It
// writes nothing when a read fails, and returns that error, naming title.
func printStore(ctx context.Context, s operations.Store, title string, opts inspectOptions, stdout io.Writer) error {
	name := title
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if opts.run != "" {
		var kept []operations.Run
		for _, r := range runs {
			if r.Owner.Name == opts.run {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			return fmt.Errorf("%s: no run named %q", name, opts.run)
		}
		runs = kept
	}
	opsOf := make([][]operations.Operation, len(runs))
	var (
		total   int
		byPhase = map[operations.OperationPhase]int{}
		byKind  = map[phase.Kind]int{}
	)
	for i, r := range runs {
		if opsOf[i], err = s.ListOperations(ctx, r.Owner, operations.OperationFilter{}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, op := range opsOf[i] {
			total++
			byPhase[op.Status.Phase]++
		}
		byKind[r.Owner.Kind]++
	}

	if opts.json {
		return printStoreJSON(title, runs, opsOf, stdout)
	}
	at := now()
	var out bytes.Buffer
	kinds := fmt.Sprintf("%d Backup, %d Restore", byKind[phase.Backup], byKind[phase.Restore])
	for i, r := range runs {
		// Kinds of one's own, in listing order: each is counted at its first run.
		if k := r.Owner.Kind; k != phase.Backup && k != phase.Restore && (i == 0 || runs[i-1].Owner.Kind != k) {
			kinds += fmt.Sprintf(", %d %s", byKind[k], k)
		}
	}
	fmt.Fprintf(&out, "%s: %s (%s), %s\n", clean(name), plural(len(runs), "run"), kinds, counts(total, byPhase))
	if len(runs) == 0 {
		_, err := stdout.Write(out.Bytes())
		return err
	}
	out.WriteByte('\n')
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tKIND\tPHASE\tITEMS\tERRORS\tWARNINGS\tOPERATIONS\tCREATED\tDURATION")
	for i, r := range runs {
		byPhase := map[operations.OperationPhase]int{}
		for _, op := range opsOf[i] {
			byPhase[op.Status.Phase]++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", cell(r.Owner.Name), cell(string(r.Owner.Kind)), cell(string(r.Phase)), r.ItemsDone, r.ItemsTotal,
			r.Errors, r.Warnings, counts(len(opsOf[i]), byPhase), age(at, r.Created), runDuration(r, at))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, r := range runs {
		out.WriteByte('\n')
		writeRun(&out, r, opsOf[i], at)
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// An inspectedRun is a run and its operations as inspect -o json prints them.
type inspectedRun struct {
	Run        operations.Run         `json:"run"`
	Operations []operations.Operation `json:"operations"`
}

// printStoreJSON prints the runs of the store title names, with their operations, as
// one JSON object: {"store": title, "runs": [{"run": ..., "operations": [...]}]}, the
// records in the fields of operations.Run and operations.Operation. Every rune that
// clean escapes is written as a JSON escape, so that the output cannot drive a terminal
// and decodes to the stored text.
func printStoreJSON(title string, runs []operations.Run, opsOf [][]operations.Operation, stdout io.Writer) error {
	out := struct {
		Store string         `json:"store"`
		Runs  []inspectedRun `json:"runs"`
	}{Store: title, Runs: make([]inspectedRun, len(runs))}
	for i, r := range runs {
		out.Runs[i] = inspectedRun{Run: r, Operations: opsOf[i]}
		if out.Runs[i].Operations == nil {
			out.Runs[i].Operations = []operations.Operation{}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, jsonForTerminal(b)+"\n")
	return err
}

// runDuration shows how long a run took, or has taken so far ("5.2s so far").
func runDuration(r operations.Run, at time.Time) string {
	switch {
	case r.Created.IsZero():
		return "-"
	case r.Completed.IsZero():
		return seconds(max(at.Sub(r.Created), 0)) + " so far"
	}
	return seconds(max(r.Completed.Sub(r.Created), 0))
}

// writeRun writes one run: its header, its phase history with the time of each change
// since the run was created, and its operations.
func writeRun(out *bytes.Buffer, r operations.Run, ops []operations.Operation, at time.Time) {
	fmt.Fprintf(out, "%s %s: %s", cell(string(r.Owner.Kind)), cell(r.Owner.Name), cell(string(r.Phase)))
	if r.Owner.UID != "" {
		fmt.Fprintf(out, " (UID %s)", cell(r.Owner.UID))
	}
	out.WriteByte('\n')
	profile := r.Profile.String()
	timeout := "the Monitor's default"
	if r.OperationTimeout > 0 {
		timeout = seconds(r.OperationTimeout)
	}
	fmt.Fprintf(out, "  created %s, profile %s, operation timeout %s\n", age(at, r.Created), cell(profile), timeout)
	if r.FailureReason != "" {
		fmt.Fprintf(out, "  failure reason: %s\n", cell(r.FailureReason))
	}
	if r.CancelRequested() {
		fmt.Fprintf(out, "  cancel requested %s: %s\n", age(at, r.Cancel.At), cell(r.Cancel.Reason))
	}
	if len(r.History) > 0 {
		out.WriteByte('\n')
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tFROM\tTO\tEVENT\tREASON")
		for _, tr := range r.History {
			when := "-"
			if !r.Created.IsZero() && !tr.Time.IsZero() {
				when = "+" + seconds(max(tr.Time.Sub(r.Created), 0))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", when, cell(string(tr.From)), cell(string(tr.To)), cell(string(tr.Event)), cell(tr.Reason))
		}
		tw.Flush()
	}
	if len(ops) > 0 {
		out.WriteByte('\n')
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PLUGIN\tRESOURCE\tOPERATION ID\tPHASE\tPROGRESS\tSTARTED\tUPDATED\tPROGRESSED\tNEXT POLL\tERROR")
		for _, op := range ops {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				cell(op.Action), cell(op.Resource.String()), cell(op.ID), cell(string(op.Status.Phase)),
				progressText(op.Status), age(at, op.Status.Started), age(at, op.Status.Updated),
				age(at, op.Monitor.ProgressAt), nextPoll(op, at), errorText(op))
		}
		tw.Flush()
	}
}

// nextPoll shows when the Monitor may next ask the plugin about op, by the schedule
// that a retry policy keeps in its MonitorState: "in 1m20s", "due" once that time has
// come, or "-" for a finished operation or one without a schedule, which every pass
// polls.
func nextPoll(op operations.Operation, at time.Time) string {
	if op.Status.Phase.Finished() {
		return "-"
	}
	return until(at, op.Monitor.NextPoll)
}

// errorText shows why op failed, or, for an unfinished operation whose Progress errors
// a retry policy is retrying, how many came in a row and the last one: "retrying (3):
// connection refused".
func errorText(op operations.Operation) string {
	ms := op.Monitor
	if op.Status.Phase.Finished() || ms.Attempts == 0 {
		return cell(op.Status.Error)
	}
	text := fmt.Sprintf("retrying (%d)", ms.Attempts)
	if ms.LastError != "" {
		text += ": " + clean(ms.LastError)
	}
	return text
}
