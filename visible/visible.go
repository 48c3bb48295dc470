// Package visible makes a stored text safe to show: every rune that could move a
// terminal's cursor, change its state, reorder the text around it or show as nothing
// becomes a visible escape. The command (cmd/itemops) prints every text of a store
// through it, and the web view (webview) shows every stored text through it before
// html/template escapes it, so that both show the same thing for a hostile name.
package visible

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every rune that Unsafe reports, and every byte that is not
// UTF-8, replaced by a visible escape, so that what is shown is what the text holds. A
// rune below U+0080 becomes \xHH, any other \uHHHH or \UHHHHHHHH, and a byte that is
// not UTF-8 \xHH. The escapes are for reading, not for undoing: a backslash stays as it
// is. A text with nothing to escape is returned as it is, without a copy.
func String(s string) string {
	if strings.IndexFunc(s, Unsafe) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			escape(&b, 'x', rune(s[i]), 2)
		case !Unsafe(r):
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

// Unsafe reports whether String escapes r: the runes that unicode.IsGraphic rejects (the
// C0 and C1 controls and DEL, so an escape sequence loses its ESC or CSI; the format
// characters of category Cf, among them the bidi controls U+061C, U+200E, U+200F, U+202A
// to U+202E and U+2066 to U+2069 and the zero-width U+200B to U+200D, U+2060 and
// U+FEFF; the line and paragraph separators; private-use, surrogate and unassigned code
// points), and, among the graphic ones, the default-ignorable runes that show as
// nothing (Hangul fillers, the combining grapheme joiner, variation selectors).
func Unsafe(r rune) bool {
	return !unicode.IsGraphic(r) || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}
