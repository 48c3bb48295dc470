package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, quickstart(ctx, filepath.Join(t.TempDir(), "itemops.db"), &out))
	require.Equal(t, `New → InProgress (started)
InProgress → WaitingForPluginOperations (main run ended)
WaitingForPluginOperations → Finalizing (all operations ended)
Finalizing → Completed (finalized)
upload-1: Completed, 300 of 300 Bytes
`, out.String())
}

// The README shows the quick start as it is here, line for line.
func TestReadmeShowsTheQuickStart(t *testing.T) {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(src), "// quick start: begin\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "\t// quick start: end\n")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(readme), "```go\n"+strings.Join(lines, "\n")+"\n```", "README.md must show examples/quickstart's quick start block verbatim")
}
