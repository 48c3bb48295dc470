package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The AppBackup goes from WaitingForPluginOperations to Completed while the Monitor polls
// its three uploads, and its status says so.
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, example(ctx, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "status: phase WaitingForPluginOperations, 0 of 3 operations completed", lines[0])
	require.Equal(t, "status: phase Completed, 3 of 3 operations completed", lines[len(lines)-1])
}
