//go:build !race

package racebuild

// Enabled is true when the binary was built with the race detector.
const Enabled = false
