//go:build !race

package controllerruntime

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = false
