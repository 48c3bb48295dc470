package apiservertest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envOrphanHelper, set in the environment of this test binary started again by
// TestNoServerOutlivesItsTestBinary, makes TestNoServerOutlivesItsTestBinary the
// helper that starts a server and dies; its value says how ("kill" or "panic").
const envOrphanHelper = "APISERVERTEST_ORPHAN_HELPER"

// proc is a process as /proc knows it: its ID and the time it started, in clock ticks
// after boot, which tells it from a later process that reuses the ID.
type proc struct {
	pid   int
	start string
}

// stat returns the fields of /proc/<pid>/stat that follow the command's name, from
// the process's state on (field 3).
func stat(pid int) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return strings.Fields(string(data[i+1:])), nil
}

// running reports whether p runs: it has not ended, is not a zombie that nobody reaped,
// and its ID is not another process's.
func (p proc) running() bool {
	f, err := stat(p.pid)
	return err == nil && len(f) > 19 && f[0] != "Z" && f[19] == p.start
}

// TestNoServerOutlivesItsTestBinary starts this test binary again as a helper that
// starts a server, whose kube-apiserver and etcd are then killed with the helper: when
// the helper is killed with SIGKILL, and when it panics as go test's -timeout makes a
// test binary panic, neither calling StopAfter. The helper also ends threads of its
// own, by goroutines that lock one and return, after the server started: the
// processes live on, as the thread that started them is not among those.
func TestNoServerOutlivesItsTestBinary(t *testing.T) {
	if mode := os.Getenv(envOrphanHelper); mode != "" {
		orphanHelper(t, mode)
		return
	}
	kube.Config(t) // skips, as the tests that need the server do, without the binaries
	for _, mode := range []string{"kill", "panic"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerOutlivesItsTestBinary$", "-test.v")
			cmd.Env = append(os.Environ(), envOrphanHelper+"="+mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			exited := make(chan struct{})
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})

			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if rest, ok := strings.CutPrefix(sc.Text(), "children "); ok {
						lines <- rest
					}
				}
				io.Copy(io.Discard, stdout)
			}()
			var children []proc
			select {
			case line, ok := <-lines:
				require.True(t, ok, "the helper ended before it printed its children")
				f := strings.Fields(line)
				require.Len(t, f, 4, "the helper's line %q", line)
				for i := 0; i < 4; i += 2 {
					pid, err := strconv.Atoi(f[i])
					require.NoError(t, err)
					children = append(children, proc{pid: pid, start: f[i+1]})
				}
			case <-time.After(5 * time.Minute):
				t.Fatalf("the helper printed no children in 5 minutes; its standard error:\n%s", stderr.Bytes())
			}
			go func() {
				cmd.Wait()
				close(exited)
			}()
			for _, c := range children {
				require.True(t, c.running(), "process %d, started by the helper, runs before the helper dies", c.pid)
			}

			if mode == "kill" {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			} else {
				_, err := stdin.Write([]byte("panic\n"))
				require.NoError(t, err)
			}
			select {
			case <-exited:
			case <-time.After(time.Minute):
				t.Fatalf("the helper did not end within a minute")
			}
			require.Eventually(t, func() bool {
				for _, c := range children {
					if c.running() {
						return false
					}
				}
				return true
			}, time.Minute, 20*time.Millisecond, "kube-apiserver (process %d) or etcd (process %d) outlived the test binary that started them",
				children[0].pid, children[1].pid)
			if mode == "panic" {
				require.Contains(t, stderr.String(), "panic: the helper panics", "the helper's standard error")
			}
		})
	}
}

// orphanHelper starts a server, ends threads, prints the process IDs and start times
// of the server's kube-apiserver and etcd, and then waits to be killed, or, in mode
// "panic", panics on the first line on its standard input.
func orphanHelper(t *testing.T, mode string) {
	s := New(Options{})
	cfg := s.Config(t)
	done := make(chan struct{})
	for range 32 {
		go func() {
			runtime.LockOSThread() // and return without unlocking: Go ends the thread
			done <- struct{}{}
		}()
		<-done
	}
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	line := "children"
	for _, arg := range []string{"--secure-port=" + u.Port(), "--data-dir=" + s.data} {
		pid, err := childWithArg(arg)
		require.NoError(t, err)
		f, err := stat(pid)
		require.NoError(t, err)
		require.Greater(t, len(f), 19)
		line += fmt.Sprintf(" %d %s", pid, f[19])
	}
	fmt.Println(line)
	if mode == "panic" {
		bufio.NewReader(os.Stdin).ReadString('\n')
		// On a goroutine of its own, as go test's -timeout panics.
		go panic("the helper panics")
	}
	time.Sleep(time.Hour)
}
