package etcdtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Build builds the etcdserver program (package etcdserver beside this one) into dir and
// returns its path. With race, it is built with the race detector.
func Build(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "etcdserver")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/itemops/itemops/storage/etcdstore/internal/etcdtest/etcdserver")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcdtest: go build: %w: %s", err, out)
	}
	return bin, nil
}

// A Process is an etcd server in a process of its own, run by the program [Build]
// builds, so that a test can kill it or keep it apart from the race detector. Its
// methods are safe for concurrent use.
type Process struct {
	args []string

	mu     sync.Mutex // guards cmd, stdin and stderr
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *bytes.Buffer

	endpoint string
}

// StartProcess starts the program bin (see [Build]) with its data in dir, which must be
// empty or hold the data of an earlier server, on free loopback ports, and waits until
// it serves. noFsync turns etcd's fsync off.
func StartProcess(bin, dir string, noFsync bool) (*Process, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	p := &Process{endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	p.args = []string{bin, "-dir", dir, "-client", p.endpoint, "-peer", fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	if noFsync {
		p.args = append(p.args, "-nofsync")
	}
	return p, p.Restart()
}

// Endpoint is the URL clients reach the server at; it stays the same across restarts.
func (p *Process) Endpoint() string { return p.endpoint }

// Client returns a new client of the server, as [Server.Client] does.
func (p *Process) Client() (*clientv3.Client, error) { return NewClient(p.endpoint) }

// Restart starts the server of a process that was killed or stopped again, on the same
// data and ports, and waits until it serves.
func (p *Process) Restart() error {
	cmd := exec.Command(p.args[0], p.args[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", p.args[0], err)
	}
	p.mu.Lock()
	p.cmd, p.stdin, p.stderr = cmd, stdin, stderr
	p.mu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if ok {
			return nil
		}
		_ = cmd.Wait()
		return fmt.Errorf("etcdtest: etcd server did not start: %s", stderr)
	case <-time.After(readyTimeout):
		p.Kill()
		return fmt.Errorf("etcdtest: etcd server not ready after %s", readyTimeout)
	}
}

// Kill kills the server with SIGKILL and waits for its process to end. Killing a
// stopped server does nothing.
func (p *Process) Kill() { p.end(func(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGKILL) }) }

// Stop stops the server (it ends when its standard input does) and waits for it.
func (p *Process) Stop() { p.end(func(*exec.Cmd) {}) }

func (p *Process) end(signal func(*exec.Cmd)) {
	p.mu.Lock()
	cmd, stdin := p.cmd, p.stdin
	p.cmd, p.stdin = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	signal(cmd)
	stdin.Close()
	_ = cmd.Wait()
}

// Pid is the process ID of the running server, or 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
