package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// TestWatcherShows checks what watch prints for a run that moves: on a terminal, the
// whole run each time, the screen cleared before every draw but the first; elsewhere,
// the summary only when it changed, and a line for each operation only when it changed.
func TestWatcherShows(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	o := operations.Owner{Kind: phase.Backup, Name: "b1\u202e"}
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
	op := operations.Operation{Owner: o, Action: "mover", ID: "op-1",
		Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 10, NTotal: 100, Created: t0}}
	other := operations.Operation{Owner: o, Action: "mover", ID: "op-2",
		Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}}

	var plain bytes.Buffer
	w := &watcher{out: &plain, interval: time.Second}
	w.showRun(r, []operations.Operation{op, other})
	w.showRun(r, []operations.Operation{op, other}) // nothing changed: nothing printed
	op.Status.NCompleted = 50
	w.showRun(r, []operations.Operation{op, other})
	done := r
	require.NoError(t, done.SetPhase(phase.Completed, "operations done", t0.Add(time.Minute)))
	op.Status.Phase = operations.OperationCompleted
	w.showRun(done, []operations.Operation{op, other})
	lines := strings.Split(strings.TrimSuffix(plain.String(), "\n"), "\n")
	require.Equal(t, []string{
		`Backup b1\u202e: WaitingForPluginOperations, items 0/0, 0 errors, 0 warnings, 2 operations (2 InProgress)`,
		"  mover op-1: InProgress 10% of 100",
		"  mover op-2: InProgress -",
		"  mover op-1: InProgress 50% of 100",
		`Backup b1\u202e: Completed, items 0/0, 0 errors, 0 warnings, 2 operations (1 InProgress, 1 Completed)`,
		"  mover op-1: Completed 50% of 100",
	}, lines)
	require.NotContains(t, plain.String(), "\x1b")

	var screen bytes.Buffer
	w = &watcher{out: &screen, term: true, interval: time.Second}
	w.showRun(r, []operations.Operation{op})
	require.NotContains(t, screen.String(), "\x1b[H\x1b[2J", "the first draw clears nothing")
	require.Contains(t, screen.String(), "OPERATION ID")
	first := screen.Len()
	w.showRun(done, []operations.Operation{op})
	require.True(t, strings.HasPrefix(screen.String()[first:], "\x1b[H\x1b[2J"), "a redraw clears the screen first")
	require.Contains(t, screen.String()[first:], "Backup b1\\u202e: Completed")
}

func TestWatchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "demo.db"}, "want STORE and RUN, got 1 arguments"},
		{[]string{"watch", "-interval", "0s", "demo.db", "b1"}, "-interval 0s: want more than 0"},
		{[]string{"watch", "s3://bucket/x", "b1"}, `unknown scheme "s3"`},
		{[]string{"watch", "-kind", "no such", "demo.db", "b1"}, "-kind"},
		{[]string{"inspect", "-o", "yaml", "demo.db"}, `-o "yaml": want text or json`},
	} {
		status, _, errOut := runCLI(tc.args...)
		require.Equal(t, 2, status, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

// TestWatchWaitsForTheWriterOfABoltFile watches a run of a boltstore file that another
// store holds open for writing: watch says the file is locked and reads it again each
// interval, and once the writer has ended the run and closed the file, it shows the run
// at its end and returns.
func TestWatchWaitsForTheWriterOfABoltFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	o := operations.Owner{Kind: phase.Backup, Name: "b1"}
	t0 := time.Now().UTC().Truncate(time.Second)
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.InProgress, "started", t0))
	require.NoError(t, s.CreateRun(ctx, r))

	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- watch(ctx, []string{"-interval", "20ms", path, "b1"}, &out, io.Discard) }()
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "b1: the store is locked by a process that writes to it; reading again every 20ms")
	}, guard, 10*time.Millisecond, "what watch printed:\n%s", &out)

	_, err = s.UpdateRun(ctx, o, func(r *operations.Run) error {
		return r.SetPhase(phase.Completed, "done", t0.Add(time.Second))
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(guard):
		t.Fatalf("watch did not return after the run ended; it printed:\n%s", out.String())
	}
	require.Contains(t, out.String(), "Backup b1: Completed")
}

// syncBuffer is a bytes.Buffer that a goroutine writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
