package main

import (
	"strings"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
)

func TestBar(t *testing.T) {
	tests := []struct {
		frac  float64
		width int
		want  string
	}{
		{0, 4, "░░░░"},
		{1, 4, "████"},
		{0.5, 4, "██░░"},
		{1.0 / 32, 4, "▏░░░"}, // one eighth of a cell
		{0.55, 4, "██▎░"},
		{-1, 3, "░░░"},
		{7, 3, "███"},
		{0.5, 0, ""},
	}
	for _, tc := range tests {
		if got := bar(tc.frac, tc.width); got != tc.want {
			t.Errorf("bar(%v, %d) = %q, want %q", tc.frac, tc.width, got, tc.want)
		}
	}
}

// TestOpBarBeyondTotal checks that an operation whose plugin reported more done than
// its total, which the Monitor records as reported, draws a full bar of the usual
// width and shows the share and the amounts as they are.
func TestOpBarBeyondTotal(t *testing.T) {
	op := operations.Operation{ID: "upload-1", Resource: operations.ResourceIdentifier{Namespace: "ns", Name: "pvc"},
		Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 3 << 20, NTotal: 2 << 20, OperationUnits: "Bytes"}}
	got := opBar(op)
	want := bar(1, 20) + " 150%  3.0 MiB / 2.0 MiB"
	if !strings.Contains(got, want) {
		t.Errorf("opBar of 3 MiB done of 2 MiB = %q, want it to contain %q", got, want)
	}
}

func TestAmountAndRate(t *testing.T) {
	tests := []struct {
		name  string
		n     int64
		units string
		want  string
	}{
		{"bytes", 512, "Bytes", "512 B"},
		{"kibibytes", 1536, "Bytes", "1.5 KiB"},
		{"gibibytes", 5 << 30, "Bytes", "5.0 GiB"},
		{"just under a mebibyte", 1<<20 - 1, "Bytes", "1024.0 KiB"},
		{"exbibytes", 1 << 62, "Bytes", "4.0 EiB"},
		{"other units", 12, "items", "12 items"},
		{"no units", 12, "", "12"},
	}
	for _, tc := range tests {
		if got := amount(tc.n, tc.units); got != tc.want {
			t.Errorf("%s: amount(%d, %q) = %q, want %q", tc.name, tc.n, tc.units, got, tc.want)
		}
	}
	if got := rate(3<<30, 2*time.Second, "Bytes"); got != "1.5 GiB/s" {
		t.Errorf("rate = %q, want 1.5 GiB/s", got)
	}
	if got := rate(10, 0, "items"); got != "-" {
		t.Errorf("rate over no time = %q, want -", got)
	}
}

func TestTruncateAndSeconds(t *testing.T) {
	if got := truncate("upload shop/data-0", 8); got != "upload …" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("█████", 5); got != "█████" {
		t.Errorf("truncate of a string that fits = %q", got)
	}
	for d, want := range map[time.Duration]string{
		1234 * time.Millisecond:  "1.23s",
		12345 * time.Millisecond: "12.3s",
		90 * time.Second:         "1m30s",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}
