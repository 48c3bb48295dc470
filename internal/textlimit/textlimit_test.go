package textlimit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFit(t *testing.T) {
	tests := []struct {
		name, s string
		limit   int
		want    string
	}{
		{"short", "boom", 10, "boom"},
		{"exact", "0123456789", 10, "0123456789"},
		{"cut", strings.Repeat("a", 100), 40, strings.Repeat("a", 21) + "… [79 bytes cut]"},
		{"on a character", "aaaaaaaaaaaaaaaaaaaaé" + strings.Repeat("b", 80), 40, strings.Repeat("a", 20) + "… [82 bytes cut]"},
		{"limit below the note", strings.Repeat("a", 100), 5, "… ["},
		{"zero limit", "abc", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit(tt.s, tt.limit)
			if got != tt.want {
				t.Errorf("Fit(%d bytes, %d) = %q, want %q", len(tt.s), tt.limit, got, tt.want)
			}
			if len(got) > tt.limit {
				t.Errorf("Fit(%d bytes, %d) is %d bytes long", len(tt.s), tt.limit, len(got))
			}
		})
	}
}

func FuzzFit(f *testing.F) {
	f.Add("héllo wörld", 8)
	f.Add(strings.Repeat("ü", 50), 30)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 0 || limit > 1<<20 {
			t.Skip()
		}
		got := Fit(s, limit)
		if len(got) > limit {
			t.Fatalf("Fit(%q, %d) = %q: %d bytes", s, limit, got, len(got))
		}
		if len(s) <= limit && got != s {
			t.Fatalf("Fit(%q, %d) = %q: changed a text that fits", s, limit, got)
		}
		if utf8.ValidString(s) && limit >= 40 && !utf8.ValidString(got) {
			t.Fatalf("Fit(%q, %d) = %q: cut a character", s, limit, got)
		}
	})
}
