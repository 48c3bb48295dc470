package apiservertest

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// PauseAPIServer stops the process of a started server's kube-apiserver (SIGSTOP)
// until [Server.ResumeAPIServer] (SIGCONT): meanwhile it neither answers nor refuses,
// and connections to it stay open, as a server that hangs. It is meant for a Server
// that no other test shares at the time. It fails when the server did not start or its
// process cannot be found; finding it reads /proc, so it works on Linux only.
// [Server.StopAfter] resumes a paused server before it stops it.
func (s *Server) PauseAPIServer() error { return s.signalAPIServer(syscall.SIGSTOP) }

// ResumeAPIServer lets a kube-apiserver that [Server.PauseAPIServer] stopped run
// again. Resuming a server that runs does nothing.
func (s *Server) ResumeAPIServer() error { return s.signalAPIServer(syscall.SIGCONT) }

func (s *Server) signalAPIServer(sig syscall.Signal) error {
	if s.cfg == nil {
		return errors.New("apiservertest: the server did not start")
	}
	u, err := url.Parse(s.cfg.Host)
	if err != nil {
		return err
	}
	pid, err := childWithArg("--secure-port=" + u.Port())
	if err != nil {
		return fmt.Errorf("apiservertest: find kube-apiserver: %w", err)
	}
	return syscall.Kill(pid, sig)
}

// RestartEtcd kills the etcd of a started server (SIGKILL), as a crash does, and
// starts it again on the same data and address, returning once it serves;
// kube-apiserver reconnects to it on its own. Requests that kube-apiserver was making
// fail meanwhile, applied or not. It is meant for a Server that no other test shares
// at the time; it works on Linux only, as [Server.PauseAPIServer] does.
func (s *Server) RestartEtcd() error {
	if s.cfg == nil {
		return errors.New("apiservertest: the server did not start")
	}
	s.etcdMu.Lock()
	defer s.etcdMu.Unlock()
	etcd := s.env.ControlPlane.Etcd
	pid, err := childWithArg("--data-dir=" + s.data)
	if err != nil {
		return fmt.Errorf("apiservertest: find etcd: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("apiservertest: kill etcd: %w", err)
	}
	// envtest waits for the process it started, so the killed one is reaped and its
	// port freed soon; until then a start could not listen on it.
	for i := 0; i < 500 && isChild(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if isChild(pid) {
		return fmt.Errorf("apiservertest: etcd (process %d) still runs 5s after SIGKILL", pid)
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("apiservertest: start etcd again: %w", err)
	}
	return nil
}

// childWithArg returns the process ID of a child of this process whose command line
// holds arg, reading /proc.
func childWithArg(arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isChild(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // it ended meanwhile
		}
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == arg {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no child process has the argument %s", arg)
}

// isChild reports whether process pid runs, as a child of this process, and is not a
// zombie.
func isChild(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The fields after the command's name, which is in parentheses and may hold
	// spaces: state, then the parent's process ID.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(stat[i+1:])
	return len(f) > 1 && string(f[0]) != "Z" && string(f[1]) == strconv.Itoa(os.Getpid())
}
