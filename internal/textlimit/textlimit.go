// Package textlimit cuts free text down to a size limit, visibly. Package operations
// states the limits (operations.MaxTextBytes); this package is the one place that cuts a
// text that the library builds from another's (a plugin's error, a reason with a prefix)
// so that the result still fits.
package textlimit

import (
	"strconv"
	"unicode/utf8"
)

// Fit returns s when it is at most limit bytes long. Otherwise it returns the longest
// prefix of s that ends on a whole UTF-8 character and, followed by a note saying how
// many bytes were cut ("… [1234 bytes cut]"), is at most limit bytes long. A limit too
// small to hold the note gives the note alone, cut to limit bytes.
func Fit(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The note's length depends on how many bytes are cut, which depends on the note's
	// length: the count has at most as many digits as len(s), so reserve that many.
	room := limit - len(note(len(s)))
	if room <= 0 {
		n := note(len(s))
		return n[:min(limit, len(n))]
	}
	cut := room
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note(len(s)-cut)
}

// note says that n bytes were cut.
func note(n int) string { return "… [" + strconv.Itoa(n) + " bytes cut]" }
