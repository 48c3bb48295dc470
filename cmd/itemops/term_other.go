//go:build !linux

package main

import "os"

// canAskWidth is false where windowWidth cannot ask the terminal.
const canAskWidth = false

// windowWidth cannot ask the terminal here.
func windowWidth(*os.File) (int, bool) { return 0, false }
