package main

import (
	"io"
	"os"
	"strconv"

	"github.com/itemops/itemops/visible"
)

// terminal reports whether w is a terminal the demo may draw on, and returns a function
// that tells its width in columns. A character device counts as a terminal unless TERM
// says "dumb" or, where the width can be asked, the device does not answer (/dev/null).
func terminal(w io.Writer) (bool, func() int) {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false, nil
	}
	info, err := f.Stat()
	if err != nil || info.Mode()&os.ModeCharDevice == 0 {
		return false, nil
	}
	if _, known := windowWidth(f); !known && canAskWidth {
		return false, nil
	}
	return true, func() int {
		if cols, ok := windowWidth(f); ok && cols > 0 {
			return cols
		}
		if cols, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && cols > 0 {
			return cols
		}
		return 80
	}
}

// clean makes s safe to show on a terminal: every rune that could move the cursor,
// change the terminal's state, reorder the text around it or show as nothing becomes a
// visible escape, so that what is shown is what the text holds. Every text of a store, a
// file or an error goes through it before the command prints it. It is
// package visible's String, which the web view shares: see there which runes are
// escaped and how.
func clean(s string) string { return visible.String(s) }

// unsafeRune reports whether clean escapes r.
func unsafeRune(r rune) bool { return visible.Unsafe(r) }
