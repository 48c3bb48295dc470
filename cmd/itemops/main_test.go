package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runCmd runs the command line args and returns the exit status, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	code, _, stderr := runCmd()
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "phases")

	code, _, stderr = runCmd("frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "frobnicate"`)

	code, _, _ = runCmd("help")
	require.Equal(t, 0, code)
}

func TestPhases(t *testing.T) {
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "phase", "testdata", name))
		require.NoError(t, err)
		return string(b)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"backup mermaid", []string{"-kind", "backup"}, golden("backup.mmd")},
		{"restore dot", []string{"-kind=Restore", "-format=dot"}, golden("restore.dot")},
		{"queued backup", []string{"-kind", "backup", "-queue"}, golden("backup-queue.mmd")},
		{"finalizing restore", []string{"-kind", "restore", "-restore-finalizing", "-format", "mermaid"}, golden("restore-finalizing.mmd")},
		{"both kinds", nil, golden("backup.mmd") + "\n" + golden("restore.mmd")},
		{"both kinds, both options", []string{"-queue", "-restore-finalizing", "-format", "dot"}, golden("backup-queue.dot") + "\n" + golden("restore-finalizing.dot")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"phases"}, tc.args...)...)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, tc.want, stdout)
		})
	}
}

func TestPhasesUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"-kind", "schedule"}, "unknown kind"},
		{"unknown format", []string{"-format", "svg"}, `unknown format "svg"`},
		{"unknown flag", []string{"-colour"}, "flag provided but not defined"},
		{"stray argument", []string{"backup"}, "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"phases"}, tc.args...)...)
			require.Equal(t, 2, code)
			require.Empty(t, stdout)
			require.True(t, strings.Contains(stderr, tc.want), "stderr %q lacks %q", stderr, tc.want)
		})
	}
	code, _, stderr := runCmd("phases", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "-restore-finalizing")
}
