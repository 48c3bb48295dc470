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
	s.thread.do(func() { err = etcd.Start() })
	if err != nil {
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

// CPUTime returns the processor time, user and system, that a started server's
// kube-apiserver and its etcd have used since they started (etcd since its last
// start, see [Server.RestartEtcd]), as Linux counts it in /proc in hundredths of a
// second: a benchmark reads it before and after the work it measures. It fails when
// the server did not start or a process cannot be found; it works on Linux only.
func (s *Server) CPUTime() (apiServer, etcd time.Duration, err error) {
	if s.cfg == nil {
		return 0, 0, errors.New("apiservertest: the server did not start")
	}
	u, err := url.Parse(s.cfg.Host)
	if err != nil {
		return 0, 0, err
	}
	if apiServer, err = cpuTimeOf("--secure-port=" + u.Port()); err != nil {
		return 0, 0, fmt.Errorf("apiservertest: kube-apiserver: %w", err)
	}
	s.etcdMu.Lock()
	defer s.etcdMu.Unlock()
	if etcd, err = cpuTimeOf("--data-dir=" + s.data); err != nil {
		return 0, 0, fmt.Errorf("apiservertest: etcd: %w", err)
	}
	return apiServer, etcd, nil
}

// cpuTimeOf returns the user and system time of the child process whose command line
// holds arg: the 14th and 15th fields of its /proc stat, in clock ticks, which Linux
// counts at 100 a second for every program (USER_HZ).
func cpuTimeOf(arg string) (time.Duration, error) {
	pid, err := childWithArg(arg)
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name, which is in parentheses and may hold
	// spaces, start with the 3rd: utime is the 12th of them, stime the 13th.
	i := bytes.LastIndexByte(stat, ')')
	var f [][]byte
	if i >= 0 {
		f = bytes.Fields(stat[i+1:])
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
