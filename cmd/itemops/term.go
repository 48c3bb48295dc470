package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
// file or an error goes through it before the command prints it. The runes escaped are
// those that unicode.IsGraphic rejects: the C0 and C1 controls and DEL (so an escape
// sequence loses its ESC or CSI), the format characters (category Cf: the bidi controls
// U+061C, U+200E, U+200F, U+202A to U+202E and U+2066 to U+2069, the zero-width U+200B
// to U+200D, U+2060 and U+FEFF, and the rest of the class), the line and paragraph
// separators, and private-use, surrogate and unassigned code points; and, among the
// graphic ones, the default-ignorable runes that show as nothing (Hangul fillers, the
// combining grapheme joiner, variation selectors). A rune below U+0080 becomes \xHH, any
// other \uHHHH or \UHHHHHHHH, and a byte that is not UTF-8 \xHH. The escapes are for
// reading, not for undoing: a backslash stays as it is.
func clean(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			escape(&b, 'x', rune(s[i]), 2)
		case !unsafeRune(r):
			b.WriteRune(r)
		case r < utf8.RuneSelf:
			escape(&b, 'x', r, 2)
		case r <= 0xFFFF:
			escape(&b, 'u', r, 4)
		default:
			escape(&b, 'U', r, 8)
		}
	}
	return b.String()
}

// escape writes a backslash, the letter and v in n lowercase hexadecimal digits.
func escape(b *strings.Builder, letter byte, v rune, n int) {
	const digits = "0123456789abcdef"
	b.WriteByte('\\')
	b.WriteByte(letter)
	for i := n - 1; i >= 0; i-- {
		b.WriteByte(digits[v>>(4*i)&0xf])
	}
}

// unsafeRune reports whether clean escapes r.
func unsafeRune(r rune) bool {
	return !unicode.IsGraphic(r) || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}
