package recipes_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGuideCodeBlocks holds the Go blocks of docs/testing.md to this package: each must
// appear, verbatim but for its indentation (a block may be the body of a test, shown
// without the tabs that indent it here), in its sources, which the build compiles and
// the tests run.
func TestGuideCodeBlocks(t *testing.T) {
	guide, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatalf("reading the guide: %v", err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatalf("listing the sources: %v", err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		src.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	if len(blocks) == 0 {
		t.Fatal("docs/testing.md has no Go block")
	}
	for _, b := range blocks {
		if !containsIndented(src.String(), b[1]) {
			t.Errorf("this Go block of docs/testing.md is not in examples/testing:\n%s", b[1])
		}
	}
}

// containsIndented reports whether src contains block with every line indented by the
// same number of tabs, up to three.
func containsIndented(src, block string) bool {
	lines := strings.SplitAfter(block, "\n")
	for tabs := range 4 {
		var b strings.Builder
		for _, l := range lines {
			if strings.TrimSpace(l) != "" {
				b.WriteString(strings.Repeat("\t", tabs))
			}
			b.WriteString(l)
		}
		if strings.Contains(src, b.String()) {
			return true
		}
	}
	return false
}
