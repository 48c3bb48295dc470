package cputime_test

import (
	"runtime"
	"testing"

	"github.com/itemops/itemops/internal/testutil/cputime"
)

func TestUsedGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		if cputime.Used() != -1 {
			t.Fatal("Used must be -1 where it is not measured")
		}
		return
	}
	before := cputime.Used()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i & 7
	}
	after := cputime.Used()
	if before < 0 || after <= before {
		t.Fatalf("Used went from %v to %v across a busy loop (%d)", before, after, x)
	}
}
