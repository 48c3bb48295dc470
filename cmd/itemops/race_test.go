//go:build race

package main

// raceEnabled is true when the tests run under the race detector, so the command they
// build is built with it too (and from the same cached packages).
const raceEnabled = true
