//go:build !linux

package apiservertest

import "os"

// writeLauncher makes path a symbolic link to target. Outside Linux the server's
// processes are started without a parent-death signal, so a test binary that dies
// leaves them running. It fails when the link cannot be made.
func writeLauncher(path, target string) error { return os.Symlink(target, path) }
