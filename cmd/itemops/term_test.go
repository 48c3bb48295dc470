package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// hiddenClasses are the runes that must never reach a terminal raw, by class: each can
// move the cursor, change the terminal's state, reorder the text around it or show as
// nothing.
var hiddenClasses = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"C0 and C1 controls and DEL (Cc)", unicode.Cc},
	{"format characters, bidi and zero-width ones included (Cf)", unicode.Cf},
	{"line separator (Zl)", unicode.Zl},
	{"paragraph separator (Zp)", unicode.Zp},
	{"private use (Co)", unicode.Co},
	{"default-ignorable (Hangul fillers, grapheme joiner)", unicode.Other_Default_Ignorable_Code_Point},
	{"variation selectors", unicode.Variation_Selector},
	{"bidi controls", &unicode.RangeTable{R16: []unicode.Range16{
		{0x061C, 0x061C, 1}, {0x200E, 0x200F, 1}, {0x202A, 0x202E, 1}, {0x2066, 0x2069, 1},
	}}},
	{"zero-width and invisible", &unicode.RangeTable{R16: []unicode.Range16{
		{0x200B, 0x200D, 1}, {0x2060, 0x2060, 1}, {0xFEFF, 0xFEFF, 1},
	}}},
}

// runesOf returns every rune of t.
func runesOf(t *unicode.RangeTable) []rune {
	var rs []rune
	for _, r := range t.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			rs = append(rs, c)
		}
	}
	for _, r := range t.R32 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			rs = append(rs, c)
		}
	}
	return rs
}

// sampled reports whether a test of every rune takes r: every rune, but with -short
// only every 61st of planes 4 to 13 (where Unicode assigns nothing) and of the
// private-use planes 15 and 16, which hold nine tenths of all code points.
func sampled(r rune) bool {
	return !testing.Short() || r>>16 < 4 || r>>16 == 14 || r%61 == 0
}

// escapeOf is the escape clean must show for r.
func escapeOf(r rune) string {
	switch {
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xFFFF:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// hidden reports whether r is in one of hiddenClasses.
func hidden(r rune) bool {
	for _, c := range hiddenClasses {
		if unicode.Is(c.table, r) {
			return true
		}
	}
	return false
}

// TestCleanEscapesEveryHiddenRune shows every rune of every class of hiddenClasses
// (with -short, as sampled says), between letters: each becomes its escape.
func TestCleanEscapesEveryHiddenRune(t *testing.T) {
	for _, c := range hiddenClasses {
		t.Run(c.name, func(t *testing.T) {
			rs := runesOf(c.table)
			if len(rs) == 0 {
				t.Fatal("no runes in the class")
			}
			for _, r := range rs {
				if !sampled(r) {
					continue
				}
				if got, want := clean("a"+string(r)+"b"), "a"+escapeOf(r)+"b"; got != want {
					t.Fatalf("clean(%U) = %q, want %q", r, got, want)
				}
			}
		})
	}
}

// TestCleanEveryRune shows every code point through clean: each comes out either as it
// is, when it is graphic and in no class of hiddenClasses, or as its escape, which is
// printable ASCII; an unassigned code point is escaped too. Bytes that are not UTF-8
// become \xHH. With -short, planes 4 to 13, where Unicode assigns nothing, and the
// private-use planes 15 and 16 are sampled (see sampled).
func TestCleanEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // not in a Go string: see the bytes that are not UTF-8 below
		}
		if !sampled(r) {
			continue
		}
		s := string(r)
		got := clean(s)
		keep := unicode.IsGraphic(r) && !hidden(r)
		switch {
		case keep && got != s:
			t.Fatalf("clean(%U) = %q: a graphic rune must be kept", r, got)
		case !keep && got != escapeOf(r):
			t.Fatalf("clean(%U) = %q, want %q", r, got, escapeOf(r))
		}
	}
	for _, c := range []struct{ in, want string }{
		{"\xff", `\xff`},
		{"a\xc3", `a\xc3`},
		{"\xed\xa0\x80", `\xed\xa0\x80`}, // a surrogate, U+D800, in UTF-8 form
		{"\uFFFD", "\uFFFD"},             // the replacement character itself is graphic
		{"\x1b[2J\u202egnp.exe", `\x1b[2J\u202egnp.exe`},
		{"back\\slash", "back\\slash"},
		{"naïve 日本 🙂", "naïve 日本 🙂"},
	} {
		if got := clean(c.in); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// hostileText holds every rune of every class of hiddenClasses, and an ESC sequence,
// between letters; split cuts it into pieces of at most n bytes.
func hostileText() string {
	var b strings.Builder
	b.WriteString("x\x1b[31m\x1b]0;title\a")
	for _, c := range hiddenClasses {
		rs := runesOf(c.table)
		if len(rs) > 600 { // private use: its ranges' ends and every 97th rune
			var some []rune
			for i, r := range rs {
				if i%97 == 0 || i == len(rs)-1 || (i > 0 && rs[i-1] != r-1) || (i+1 < len(rs) && rs[i+1] != r+1) {
					some = append(some, r)
				}
			}
			rs = some
		}
		for _, r := range rs {
			b.WriteRune(r)
			b.WriteByte('y')
		}
	}
	b.WriteString("\xff")
	return b.String()
}

// requireNoHidden fails when out holds a rune of hiddenClasses other than a newline, or
// bytes that are not UTF-8.
func requireNoHidden(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%s: bytes that are not UTF-8 reach the output: %q", what, out)
	}
	var found []string
	for i, r := range out {
		if r != '\n' && hidden(r) {
			found = append(found, fmt.Sprintf("%U at byte %d", r, i))
		}
	}
	if diff := cmp.Diff([]string(nil), found); diff != "" {
		t.Fatalf("%s: raw runes reach the output (-want +got):\n%s", what, diff)
	}
}

// chunks cuts s, at rune boundaries, into pieces of at most n bytes.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for !utf8.RuneStart(s[i]) {
			i--
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}

// hostileStore writes a store whose runs and operations hold hostileText in every text a
// command shows: names, UIDs, reasons, operation IDs, actions, resources, errors and
// the last error a retry policy kept. It returns the path and the owners of its runs.
func hostileStore(t *testing.T) (string, []operations.Owner) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hostile.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var owners []operations.Owner
	for i, text := range chunks(hostileText(), 1500) {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run-%d-%s", i, text), UID: text}
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.InProgress, text, t0))
		op := operations.Operation{Owner: o, Action: "a/" + text, ID: "op-" + text,
			Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns" + text, Name: text},
			Status:   operations.Status{Phase: operations.OperationFailed, Error: text, Description: text, Created: t0}}
		retrying := op
		retrying.ID = "retrying-" + text
		retrying.Status = operations.Status{Phase: operations.OperationInProgress, Description: text, Created: t0}
		retrying.Monitor = operations.MonitorState{ProgressAt: t0, Attempts: 1, ErrorSince: t0, NextPoll: t0.Add(time.Hour), LastError: text}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, []operations.Operation{op, retrying}))
		owners = append(owners, o)
	}
	return path, owners
}

// cutLosingRecords writes a copy of the store b cut at the first of a few points (half
// its pages, then thirds, quarters and fifths) from which salvage names a lost
// operation or rebuilds a run, and returns its path. Which records a cut loses depends
// on where bbolt placed the pages, which changes from one writing of the store to the
// next (its freelist hands out free pages in no set order), and a cut that leaves only
// stale copies behind it loses no record; it fails when no point loses one.
func cutLosingRecords(t *testing.T, b []byte) string {
	t.Helper()
	pages := boltfault.LastMeta(b).Pages
	cut := filepath.Join(t.TempDir(), "cut.db")
	for _, f := range [][2]int{{1, 2}, {1, 3}, {2, 3}, {1, 4}, {3, 4}, {1, 5}, {2, 5}, {3, 5}, {4, 5}} {
		require.NoError(t, os.WriteFile(cut, b[:pages*f[0]/f[1]*boltfault.PageSize], 0o600))
		_, out, _ := runCLI("salvage", "-json", cut, filepath.Join(t.TempDir(), "saved.db"))
		var sum salvageSummary
		require.NoError(t, json.Unmarshal([]byte(out), &sum))
		for _, l := range sum.Lost {
			if l.Operation != "" {
				return cut
			}
		}
		if len(sum.Rebuilt) > 0 {
			return cut
		}
	}
	t.Fatal("no cut of the store loses a record that salvage names")
	return ""
}

// TestCommandsEscapeStoredText runs every command that shows stored text on a store
// that holds every rune of hiddenClasses in every such text, and scans each rune of
// what it prints, on stdout and stderr: none of them reaches it raw.
func TestCommandsEscapeStoredText(t *testing.T) {
	path, owners := hostileStore(t)
	text := hostileText()
	// A copy cut short: salvage names its lost records and the runs it rebuilt, hostile
	// names and IDs included.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	cut := cutLosingRecords(t, b)
	demoDB := filepath.Join(t.TempDir(), "demo.db")
	require.NoError(t, os.WriteFile(demoDB, b, 0o600))
	for _, args := range [][]string{
		// The demo recovers the store's runs, InProgress, and names each.
		{"demo", "-db", demoDB, "-items", "10", "-operations", "2", "-speed", "20"},
		{"salvage", cut, filepath.Join(t.TempDir(), "saved.db")},
		{"salvage", "-json", cut, filepath.Join(t.TempDir(), "saved.db")},
		{"inspect", path},
		{"check", path},
		{"cancel", "-reason", chunks(text, 4000)[0], path, owners[0].Name},
		{"cancel", path, owners[0].Name}, // a second request: it echoes the stored reason
		{"cancel", path, "no such run" + chunks(text, 4000)[0]},
		{"inspect", "-run", "missing" + chunks(text, 4000)[0], path},
	} {
		status, out, errOut := runCLI(args...)
		t.Logf("%s: status %d, %d bytes out, %d bytes err", args[0], status, len(out), len(errOut))
		require.NotEmpty(t, out+errOut, "%s printed nothing", args[0])
		requireNoHidden(t, args[0]+" stdout", out)
		requireNoHidden(t, args[0]+" stderr", errOut)
		if args[1] == "-json" {
			// The JSON escapes decode to the stored text.
			var sum salvageSummary
			require.NoError(t, json.Unmarshal([]byte(out), &sum))
			stored := map[string]bool{}
			for i, c := range chunks(text, 1500) {
				// JSON holds UTF-8 only.
				stored[strings.ToValidUTF8("op-"+c, "\uFFFD")] = true
				stored[strings.ToValidUTF8("retrying-"+c, "\uFFFD")] = true
				stored[strings.ToValidUTF8(owners[i].String(), "\uFFFD")] = true
			}
			named := 0
			for _, l := range sum.Lost {
				if l.Operation != "" {
					require.True(t, stored[l.Operation], "operation %q is named lost other than as it was stored", l.Operation)
					named++
				}
			}
			for _, r := range sum.Rebuilt {
				require.True(t, stored[r.Run], "run %q is named rebuilt other than as it was stored", r.Run)
			}
			t.Logf("salvage -json: %d operations named lost, %d runs rebuilt", named, len(sum.Rebuilt))
			require.Positive(t, named+len(sum.Rebuilt), "no operation named lost and no run rebuilt")
		}
	}
}
