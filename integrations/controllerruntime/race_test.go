//go:build race

package controllerruntime

// raceEnabled is true when the tests run under the race detector, so the go commands they
// run build with it too, from the packages the tests' own build left in the cache.
const raceEnabled = true
