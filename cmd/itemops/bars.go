package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// eighths are the block characters that fill a bar's cell by eighths.
var eighths = []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}

// bar draws frac (clamped to [0, 1]) as a bar of width cells, to the eighth of a cell,
// on a shaded track.
func bar(frac float64, width int) string {
	if width <= 0 {
		return ""
	}
	frac = min(max(frac, 0), 1)
	n := int(frac*float64(width*8) + 0.5)
	full, part := n/8, n%8
	var b strings.Builder
	b.WriteString(strings.Repeat("█", full))
	cells := full
	if part > 0 {
		b.WriteString(eighths[part])
		cells++
	}
	b.WriteString(strings.Repeat("░", width-cells))
	return b.String()
}

// fraction returns done/total, or 0 when total is not positive.
func fraction(done, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(done) / float64(total)
}

// amount shows n of units: bytes in binary multiples ("1.5 GiB"), anything else as a
// number and its units ("12 items").
func amount(n int64, units string) string {
	if units != "Bytes" && units != "bytes" {
		if units == "" {
			return fmt.Sprint(n)
		}
		return fmt.Sprintf("%d %s", n, units)
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// rate shows n units moved in d as a rate: "1.9 GiB/s", "250 items/s"; "-" when d is
// not positive.
func rate(n int64, d time.Duration, units string) string {
	if d <= 0 {
		return "-"
	}
	perSecond := int64(float64(n) / d.Seconds())
	return amount(perSecond, units) + "/s"
}

// seconds shows d to the hundredth of a second below ten seconds, to the tenth below a
// minute, and as the duration function shows it beyond.
func seconds(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return duration(d)
}

// truncate cuts s to at most width characters, ending it with "…" when it was cut.
func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
