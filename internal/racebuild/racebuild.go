// Package racebuild tells tests whether they were built with the race detector, so that
// the go commands they run (a build of the itemops command, go list -export, a build of
// an operator's module) build the same way and reuse the packages the tests' own build
// left in the cache.
package racebuild

// Flags returns the go command's flags that build as this binary was built: -race when
// it runs under the race detector, none otherwise.
func Flags() []string {
	if Enabled {
		return []string{"-race"}
	}
	return nil
}
