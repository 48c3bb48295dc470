package visible

import "testing"

// The whole table of runes is checked by cmd/itemops (term_test.go, TestClean), through
// the command's clean; these are the cases the web view relies on.
func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain name-1", "plain name-1"},
		{"naïve 日本 🙂", "naïve 日本 🙂"},
		{"\x1b[2J\u202egnp.exe", `\x1b[2J\u202egnp.exe`},
		{"a\x00b", `a\x00b`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"\u2067isolate\u2069", `\u2067isolate\u2069`},
		{"\xff", `\xff`},
		{"\uFFFD", "\uFFFD"},
		{"<b>&amp;</b>", "<b>&amp;</b>"}, // mark-up is html/template's to escape
		{"back\\slash", "back\\slash"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
