package racebuild

import (
	"strings"
	"testing"
)

func TestEnvironKeepsGORACEOptions(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"", "GORACE=atexit_sleep_ms=0"},
		{"halt_on_error=1", "GORACE=halt_on_error=1 atexit_sleep_ms=0"},
	} {
		t.Setenv("GORACE", tc.set)
		env := Environ()
		var last string
		for _, kv := range env {
			if strings.HasPrefix(kv, "GORACE=") {
				last = kv // a program sees the last value of a repeated name
			}
		}
		if last != tc.want {
			t.Errorf("GORACE=%q: the program sees %q, want %q", tc.set, last, tc.want)
		}
	}
}
