package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuideCodeBlocks holds the Go blocks of docs/operators.md to this package: each must
// appear, verbatim, in its sources, which the build compiles and the tests run.
func TestGuideCodeBlocks(t *testing.T) {
	guide, err := os.ReadFile("../../docs/operators.md")
	require.NoError(t, err)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		require.Contains(t, src.String(), b[1], "a code block of docs/operators.md is not in examples/operator")
	}
}
