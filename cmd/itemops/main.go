// Command itemops shows what the itemops library does, and shows, checks and cancels
// the runs of any store: a boltstore file, an etcd store or an operator's kubestore.
//
// Usage:
//
//	itemops demo [-db FILE] [-items N] [-operations K] [-speed X] [-crash-after D] [-fail-rate P]
//	itemops inspect [-run NAME] [-o text|json] [store flags] FILE|STORE
//	itemops watch [-kind backup|restore|KIND] [-interval D] [store flags] STORE RUN
//	itemops phases [-kind backup|restore] [-format mermaid|dot] [-queue] [-restore-finalizing]
//	itemops check [store flags] STORE
//	itemops cancel [-kind backup|restore|KIND] [-reason TEXT] [store flags] STORE RUN
//	itemops salvage [-json] DB NEW
//	itemops serve [-addr HOST:PORT] [-allow-cancel] [store flags] STORE
//
// It is a module of its own (github.com/itemops/itemops/cmd/itemops), so that the etcd
// client and client-go, which it opens stores with, stay out of the library's module
// graph; from the repository's root, go -C cmd/itemops run . runs it (a relative path
// is then read from cmd/itemops).
//
// # Naming a store
//
// inspect, watch, check, cancel and serve name a store in one way:
//
//   - a path, or bolt:///ABS/PATH: a boltstore file (inspect also reads an
//     itemoperations.json.gz file at a path); the path of a bolt:// URL is taken as it
//     is, with no %-decoding;
//   - etcd://HOST:PORT[,HOST:PORT...]/PREFIX: the etcdstore under PREFIX (empty: the root
//     of the key space) of the etcd cluster of those members; TLS comes from the flags
//     -cacert (the CA certificates that verify the server), -cert and -key (a client
//     certificate), or, where a flag is not given, from the environment variables
//     ITEMOPS_ETCD_CACERT, ITEMOPS_ETCD_CERT and ITEMOPS_ETCD_KEY;
//   - kube://CONTEXT/NAMESPACE, or kube:///NAMESPACE for the current context: the
//     kubestore in NAMESPACE, through the kubeconfig as kubectl finds it (the file of
//     -kubeconfig, else the files of KUBECONFIG, else ~/.kube/config, loaded by
//     client-go's clientcmd rules). The namespace is what follows the last slash, so a
//     context may hold slashes.
//
// A name that does not parse gives a usage error (exit status 2) saying what is wrong.
// No command creates a store: an etcd prefix without the store's format marker, and a
// namespace without the store's marker object, are refused before the store is opened,
// and left as they were. inspect, watch, check and serve (without -allow-cancel) open a
// kubestore read-only (package storage/kubestore, Options.ReadOnly): they write nothing
// there, not even the sweep of what writers left half done that a writable Open makes,
// and need only get and list on the store's resources (kubestore's viewer Role).
//
// watch shows one run as it moves: its phase, counts, history and operations, read again
// every -interval (1s), until the run ends (a terminal phase: the command exits 0) or
// the command is interrupted (Ctrl-C, also exit 0). On a terminal it redraws the run in
// place; on anything else it prints a line when the run's summary changes and a line
// for each operation whose phase, progress or error changed. A boltstore file is opened
// for each read and closed after it: while another process writes to the file, bbolt's
// lock keeps it out, and watch says so and tries again at the next interval.
//
// demo backs up a synthetic application, then restores it, through the itemops packages,
// on a bbolt store (by default a new file in a temporary directory): the phase rules,
// a v2 data-mover plugin and a v1 plugin in an adapters.Registry, the operations Monitor
// polling the mover's operations, a Velero-layout tarball in a bucket directory beside
// the store, read back by restoreorder, and progress counting. On a terminal it draws
// live progress bars; elsewhere it prints plain lines. It ends with a summary table.
// -crash-after kills the process hard that long after it starts its work; running the
// demo again with the same -db recovers (runs InProgress fail, waiting runs resume) and
// finishes the round. -fail-rate makes a share of the operations fail or stall until
// they time out, so the PartiallyFailed paths show.
//
// inspect prints the operations of an itemoperations.json.gz file, as Velero keeps them
// in its bucket: a line naming the backup or restore (told from the content) with counts
// by phase, then one row per operation with its plugin, resource, operation ID, phase,
// progress, the age of its start and of its last update, and its error. A file that
// cannot be read gives the decoder's error, saying where the file is broken, and exit
// status 1. Given a boltstore file instead (told from its first bytes), or an etcd
// store or a kubestore, it prints the store's runs (by kind, counted per kind: Backup, Restore, then the kinds of one's own
// a program declared, by name), then each run with its phase history and its
// operations, with two columns more than a file has: the age of the last progress a
// Monitor with a stall timeout saw (PROGRESSED), and when a Monitor with a retry policy
// asks again about an operation whose Progress errs (NEXT POLL: "in 1m20s", "due" or
// "-"), whose ERROR then reads "retrying (2): " and the last error. The store is opened
// read-only, so several inspections may run at once; a store that another process
// writes to is refused (boltstore.ErrLocked). A store of an earlier schema is read
// through a migrated copy, and the file is left as it is. With -o json, inspect prints
// one JSON object instead, {"store": NAME, "runs": [{"run": ..., "operations": [...]}]},
// whose records have the fields of operations.Run and operations.Operation; every rune
// the sanitizer below escapes is written as a JSON \u escape, so it decodes to the
// stored text and cannot drive a terminal.
//
// phases prints the phase machines as Mermaid or Graphviz text: both kinds unless -kind
// names one.
//
// cancel records a request to cancel a run of a store, with a reason; the
// Monitor honours it on its next pass. -kind is needed only when runs of several kinds
// share the name: backup, restore, or the name of a kind of one's own. A request cannot be withdrawn, and a run that has
// ended cannot be cancelled.
//
// serve serves the web view of a store (package webview) over HTTP on -addr
// (127.0.0.1:8080 by default; port 0 picks a free one, and the line serve prints names
// it) until interrupted: the runs, filtered and paged, each run's phase history and
// operations, each operation, as pages and as JSON. A boltstore file is opened read-only
// and held open while serve runs, so no other process can write to it meanwhile; an
// etcd store or a kubestore is read while its Monitors work on it. With
// -allow-cancel it is opened for writing, and a run's page can request the run's cancel,
// by POST with a token, from a request of this machine to a loopback host name only
// (-addr must then be a loopback address); the Monitor of the next process that works on
// the store honours it, as with cancel.
//
// check reads every page of a boltstore file and every run and operation in it (of an
// etcd store or a kubestore, every run and operation, read through the store, which
// checks each record's sum; of a kubestore also every object of the namespace, each
// on its own, with kubestore's Store.Check: the markers, each run's object against
// its sum, each chunk against the SHA-256 its run gives, the labels and
// ownerReferences of the chunks, chunks that no run names, pending objects past their
// grace and objects the store did not name), and prints one line: that the store is
// sound, with its counts, or what is damaged, naming each damaged object (exit status
// 1). Every
// entry of a store carries a checksum, so check finds any changed byte of the data the
// store reads, a rolled-back last transaction and a damaged freelist (see package
// storage/boltstore, "Damage"). salvage copies every run and operation that remains
// intact in a damaged or cut store into a new file, reading the file page by page
// (boltstore.Salvage), each operation on its own; it names each record it lost, by run
// and operation ID, and says what damage it found, in lines or, with -json, in one JSON
// object (exit status 1 when either is not empty; its usage, salvage -h, documents both).
// A run whose record is lost but some of whose operations remain is rebuilt from them,
// as Failed with a reason that says its record was lost, and named on a rebuilt: line
// (in -json, "rebuilt"), so that every operation that remains is saved.
// It writes the new file beside its name and links it into place once whole, so an
// interrupted salvage leaves none. inspect, cancel and demo check a store when they open
// it, so a damaged file gives one error line, not a crash, and is never written to.
// inspect, check, cancel and salvage never create a store: on a path where there is none
// they fail. No command writes to a file that exists and is not a store, an empty one
// included: cancel and demo refuse it (boltstore.Options.NoInit), leaving it as it was.
//
// # Text on the terminal
//
// Every text a command shows from a store, a file or an error (names, IDs, reasons,
// errors, history events) goes through one sanitizer: control characters and escape
// sequences, bidi controls, zero-width and other format characters, line and paragraph
// separators, private-use and unassigned code points, invisible fillers, and bytes that
// are not UTF-8 are shown as visible escapes (\x1b, \u202e), so that no stored text
// can drive the terminal or reorder what is shown around it.
//
// # Memory
//
// inspect reads an itemoperations file one record at a time and refuses a record past 8
// MiB and a file past 256 MiB of JSON text (the decoder's default limits), so a gzip bomb
// costs little; it holds the table of a valid file in memory. The store commands read a
// store through bbolt's memory map of the file, a page at a time; salvage reads the file
// a page at a time and holds the entries it read, the store's records, in memory. On every input of the
// corpus of hostile inputs in testdata/hostile (gzip bombs of 64 and 260 MiB, damaged
// and cut stores, records with negative counts or escape sequences) no command allocates
// more than 64 MiB, as TestHostileCorpusCommand measures.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// A command is one subcommand: it parses its own flags from args and writes to stdout;
// an error it returns is printed to stderr and makes the process exit with status 1.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"demo":    {"back up and restore a synthetic application end to end, on a bbolt store", runDemo},
	"phases":  {"print the phase state machines as Mermaid or Graphviz text", runPhases},
	"inspect": {"print a store's runs and operations (bolt, etcd, kube), or an itemoperations.json.gz file", runInspect},
	"check":   {"check a store for damage: every record (and every page of a bolt file)", runCheck},
	"cancel":  {"request the cancel of a run in a store (one-way)", runCancel},
	"salvage": {"copy what can still be read from a damaged boltstore file into a new one", runSalvage},
	"serve":   {"serve the web view of a store (read-only unless -allow-cancel)", runServe},
	"watch":   {"show a run of a store as it moves, until it ends", runWatch},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status: 0 on success, 1 when
// the command failed, 2 for a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "itemops: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "itemops %s: %s\n", args[0], clean(err.Error()))
		return 2
	}
	fmt.Fprintf(stderr, "itemops %s: %s\n", args[0], clean(err.Error()))
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: itemops <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
	fmt.Fprint(w, "\n", storeUsage)
	fmt.Fprintln(w, "\nRun 'itemops <command> -h' for the flags of a command.")
}

// A usageError is a bad flag or argument; it makes the process exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// newFlagSet returns a flag set for command name that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("itemops "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseArgs parses args into fs, turns a parse failure into a usageError, and wants n
// arguments after the flags, which want describes ("DB and NEW").
func parseArgs(fs *flag.FlagSet, args []string, n int, want string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() != n {
		return usageError{fmt.Sprintf("want %s, got %d arguments", want, fs.NArg())}
	}
	return nil
}

// parseFlags parses args into fs and turns a parse failure into a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	return nil
}
