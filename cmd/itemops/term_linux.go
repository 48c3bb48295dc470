//go:build linux

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// canAskWidth is true where windowWidth asks the terminal.
const canAskWidth = true

// windowWidth asks the terminal f for its width in columns; ok is false when f is not a
// terminal.
func windowWidth(f *os.File) (cols int, ok bool) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, false
	}
	return int(ws.Col), true
}
