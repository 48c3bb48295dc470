package opsfile

import (
	"testing"
	"time"
)

// The decoder parses Velero's time form without time.Parse; these check that the fast
// path agrees with time.Parse wherever it answers.

var timeSeeds = []struct {
	in   string
	fast bool // the fast path answers
}{
	{"2022-12-14T12:00:00Z", true},
	{"0000-01-01T00:00:00Z", true},
	{"9999-12-31T23:59:59Z", true},
	{"2024-02-29T00:00:00Z", true},
	{"2023-02-29T00:00:00Z", false}, // not a leap year
	{"2022-04-31T00:00:00Z", false},
	{"2022-12-14T24:00:00Z", false},
	{"2022-12-14T23:60:00Z", false},
	{"2022-12-14T23:59:60Z", false},
	{"2022-13-01T00:00:00Z", false},
	{"2022-00-01T00:00:00Z", false},
	{"2022-12-00T00:00:00Z", false},
	{"2022-12-14T12:00:00z", false},
	{"2022-12-14t12:00:00Z", false},
	{"2022-12-14T12:00:00+00:00", false},
	{"2022-12-14T12:00:00.5Z", false},
	{"+022-12-14T12:00:00Z", false},
	{"2022-1a-14T12:00:00Z", false},
}

func TestParseUTCSecond(t *testing.T) {
	for _, tc := range timeSeeds {
		got, ok := parseUTCSecond([]byte(tc.in))
		if ok != tc.fast {
			t.Errorf("parseUTCSecond(%q) ok = %v, want %v", tc.in, ok, tc.fast)
			continue
		}
		if ok {
			checkAgainstTimeParse(t, tc.in, got)
		}
	}
}

func FuzzParseUTCSecond(f *testing.F) {
	for _, tc := range timeSeeds {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := parseUTCSecond([]byte(s)); ok {
			checkAgainstTimeParse(t, s, got)
		}
	})
}

func checkAgainstTimeParse(t *testing.T, s string, got time.Time) {
	t.Helper()
	want, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parseUTCSecond accepts %q, time.Parse refuses it: %v", s, err)
	}
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("parseUTCSecond(%q) = %v, time.Parse gives %v", s, got, want)
	}
}
