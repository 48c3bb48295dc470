package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/webview"
)

// runServe serves the web view of a boltstore file until the process is interrupted.
func runServe(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

// serve serves the web view of a boltstore file until ctx is done, then shuts the
// server down, letting the requests under way finish for up to five seconds.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: itemops serve [-addr HOST:PORT] [-allow-cancel] [store flags] STORE")
		fmt.Fprintln(stderr, "\nserves the web view of STORE (package webview): its runs, each run's")
		fmt.Fprintln(stderr, "phase history and operations, each operation, as pages and as JSON (add format=json),")
		fmt.Fprintln(stderr, "until interrupted. A boltstore file is opened read-only unless -allow-cancel, and held")
		fmt.Fprintln(stderr, "open while serve runs: no other process can write to it meanwhile (bbolt locks the file);")
		fmt.Fprintln(stderr, "an etcd store or a kubestore is read while its Monitors work on it, a kubestore read-only")
		fmt.Fprintln(stderr, "unless -allow-cancel (it then writes nothing there, and needs only get and list).")
		fmt.Fprintln(stderr, "With -allow-cancel, a run's page can request its cancel, which the Monitor of the next")
		fmt.Fprintln(stderr, "process that works on the store (a demo run again on it) honours; it needs a loopback")
		fmt.Fprint(stderr, "-addr, and only requests from this machine, to a loopback host name, may cancel.\n\n")
		fmt.Fprint(stderr, storeUsage)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:8080", "the `address` to listen on; port 0 picks a free one")
	allowCancel := fs.Bool("allow-cancel", false, "let the view request the cancel of a run (loopback -addr only)")
	sf := addStoreFlags(fs)
	if err := parseArgs(fs, args, 1, "STORE"); err != nil {
		return err
	}
	sn, err := parseStoreName(fs.Arg(0))
	if err != nil {
		return usageError{err.Error()}
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageError{fmt.Sprintf("-addr %q: %v", *addr, err)}
	}
	if *allowCancel && !loopback(host) {
		return usageError{fmt.Sprintf("-allow-cancel needs a loopback -addr (127.0.0.1, [::1] or localhost), not %q", *addr)}
	}
	s, err := openServed(ctx, sn, sf, *allowCancel)
	if err != nil {
		return err
	}
	defer s.Close()
	var wopts []webview.Option
	if *allowCancel {
		wopts = append(wopts, webview.WithAuthorize(fromThisMachine))
	}
	h, err := webview.New(s, wopts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	mode := "read-only"
	if *allowCancel {
		mode = "cancel allowed from this machine"
	}
	fmt.Fprintf(stdout, "serving %s (%s) at http://%s/\n", clean(sn.String()), mode, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Shutdown waits for the requests under way. It counts a connection on which no
	// request came yet (a client may dial one it never uses) as under way for its first
	// 5 s, so it is given longer than that; what is still open then is closed.
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openServed opens the store serve shows: a boltstore file or a kubestore read-only
// unless cancel, which opens it for writing; an etcd store as openNamed does.
func openServed(ctx context.Context, sn storeName, sf *storeFlags, cancel bool) (*openedStore, error) {
	if sn.kind != boltStore {
		mode := forReading
		if cancel {
			mode = forWriting
		}
		return openNamed(ctx, sn, sf, mode)
	}
	// serve never creates a store, and reads one read-only unless it may cancel.
	if _, err := os.Lstat(sn.path); err != nil {
		return nil, fmt.Errorf("%w (serve shows an existing store, it never creates one)", err)
	}
	opts := &boltstore.Options{ReadOnly: true}
	if cancel {
		opts = &boltstore.Options{NoInit: true, OpenFile: openExisting}
	}
	s, err := boltstore.Open(sn.path, opts)
	if errors.Is(err, boltstore.ErrLocked) {
		return nil, fmt.Errorf("%w; another process is writing to the store (a demo running on it?): serve it once that process has stopped", err)
	}
	if err != nil {
		return nil, err
	}
	return &openedStore{Store: s, name: sn, close: s.Close}, nil
}

// loopback reports whether host names this machine only: localhost or a loopback IP.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fromThisMachine is the cancel hook of serve -allow-cancel: the request must come from
// a loopback address and name a loopback host, so that a page of another site that
// resolves its own name to 127.0.0.1 (DNS rebinding) cannot read a token and post it.
func fromThisMachine(r *http.Request, _ webview.Action) error {
	remote, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !loopback(remote) {
		return fmt.Errorf("a cancel must come from this machine, not %q", r.RemoteAddr)
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if !loopback(host) {
		return fmt.Errorf("a cancel must be sent to localhost or a loopback address, not %q", r.Host)
	}
	return nil
}
