// Command etcdserver runs one etcd member until its standard input ends or it is killed.
// The tests of package etcdstore run it (see etcdtest.Process): to keep etcd out of the
// race detector's reach, and, in the crash test, to kill it with SIGKILL while a client
// writes and restart it on the same data directory.
//
//	etcdserver -dir DIR -client http://127.0.0.1:PORT -peer http://127.0.0.1:PORT [-nofsync]
//
// It prints "ready" on its standard output once it serves clients.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

func main() {
	dir := flag.String("dir", "", "data directory")
	client := flag.String("client", "", "client URL")
	peer := flag.String("peer", "", "peer URL")
	noFsync := flag.Bool("nofsync", false, "turn etcd's fsync off")
	flag.Parse()
	srv, err := etcdtest.Start(*dir, etcdtest.Options{ClientURL: *client, PeerURL: *peer, NoFsync: *noFsync})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // the test closes it, or dies
	srv.Stop()
}
