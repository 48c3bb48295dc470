package apiservertest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// The environment variables by which a launcher that [writeLauncher] writes tells the
// test binary it starts again to exec a server's program.
const (
	envExec   = "APISERVERTEST_EXEC"   // the program to exec
	envParent = "APISERVERTEST_PARENT" // the process ID of the test binary that started it
)

// init makes of a test binary that a launcher started the program the launcher names,
// one that dies with the test binary that started it, before the test binary does
// anything else. In every other process it does nothing.
func init() {
	if path := os.Getenv(envExec); path != "" {
		os.Exit(execWithParentDeath(path, os.Getenv(envParent)))
	}
}

// execWithParentDeath asks Linux to kill this process (SIGKILL) when its parent ends,
// checks that the parent is still the process whose ID is parent, and replaces this
// process with the program at path, given this process's arguments and its
// environment without the launcher's variables. It returns only on failure, with the
// exit code to end with, after writing why on standard error.
func execWithParentDeath(path, parent string) int {
	// The death signal belongs to the thread that asks for it; exec runs on the same.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "apiservertest: ask to die with the test binary before exec %s: %v\n", path, errno)
		return 1
	}
	// A parent that ended before the request above sent no signal: then this process
	// has another parent, and ends here.
	if strconv.Itoa(os.Getppid()) != parent {
		fmt.Fprintf(os.Stderr, "apiservertest: the test binary (process %s) that started %s has ended\n", parent, path)
		return 1
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envExec+"=") && !strings.HasPrefix(kv, envParent+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(path, append([]string{path}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "apiservertest: exec %s: %v\n", path, err)
	return 127
}

// writeLauncher writes at path a shell script that starts the test binary again, to
// exec the program at target with the script's arguments once the init function above
// asked Linux to kill it when the test binary ends. envtest starts the script, not
// target, as it lets no caller set the SysProcAttr (Pdeathsig) of the commands it
// starts. It fails when the test binary cannot be found or the script not written.
func writeLauncher(path, target string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the test binary, to start %s from: %w", target, err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexport %s=%s %s=%d\nexec %s \"$@\"\n",
		envExec, shellQuote(target), envParent, os.Getpid(), shellQuote(self))
	return os.WriteFile(path, []byte(script), 0o755)
}

// shellQuote returns s quoted for the shell, as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
