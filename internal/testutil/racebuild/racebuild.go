// Package racebuild tells tests whether they were built with the race detector, so that
// the go commands they run (a build of the itemops command, go list -export, a build of
// an operator's module) build the same way and reuse the packages the tests' own build
// left in the cache, and gives the programs they start an environment in which a
// race-built program exits at once.
package racebuild

import (
	"os"
	"strings"
)

// Flags returns the go command's flags that build as this binary was built: -race when
// it runs under the race detector, none otherwise.
func Flags() []string {
	if Enabled {
		return []string{"-race"}
	}
	return nil
}

// Environ returns this process's environment for a program a test starts, with the race
// detector told not to wait as the program exits. A program built with -race sleeps a
// second when it exits (GORACE's atexit_sleep_ms, 1000 by default) to let its other
// goroutines report late races; a test that runs such programs one after another waits
// that second each time. Races are still reported when they happen, and a program that
// reported one still exits with code 66. GORACE's other options, when set, are kept. A
// program built without -race ignores GORACE.
func Environ() []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(os.Environ(), "GORACE="+gorace)
}
