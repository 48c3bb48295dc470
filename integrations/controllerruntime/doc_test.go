package controllerruntime

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocSnippet holds the code of the package comment to ExampleNew, which the build
// compiles: each part of the snippet between its "..." lines must appear, verbatim, in
// example_test.go.
func TestDocSnippet(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	blocks := regexp.MustCompile(`(?m)(?:^//\t.*\n)+`).FindAllString(string(doc), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		code := strings.ReplaceAll(b, "//\t", "\t")
		for _, part := range strings.Split(code, "\t...\n") {
			if !strings.Contains(string(example), part) {
				t.Errorf("a part of doc.go's snippet is not in example_test.go:\n%s", part)
			}
		}
	}
}
