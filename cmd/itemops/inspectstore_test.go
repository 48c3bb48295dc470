package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// storeFile writes a boltstore file with a completed backup and its operations, and a
// restore that a restart failed, and returns its path. Of the backup's operations, one
// has no state of a Monitor's retry policy, one failed with such state left, one is in
// backoff and one is due again.
func storeFile(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "itemops.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	defer s.Close()

	created := at.Add(-10 * time.Minute)
	b := operations.Owner{Kind: phase.Backup, Name: "backup-1.1", UID: "uid-b"}
	run := operations.Run{Owner: b, Phase: phase.New, Created: created, OperationTimeout: 5 * time.Second, ItemsTotal: 40, ItemsDone: 40}
	require.NoError(t, run.SetPhase(phase.InProgress, "backup started", created))
	require.NoError(t, s.CreateRun(ctx, run))
	ops := backupOps()
	for i := range ops {
		ops[i].Owner = b
		ops[i].ID = ops[i].ID + "-b"
	}
	// A finished operation's schedule is not shown.
	ops[1].Monitor = operations.MonitorState{ProgressAt: at.Add(-27 * time.Hour), Attempts: 2, ErrorSince: at.Add(-26 * time.Hour),
		NextPoll: at.Add(time.Hour), LastError: "not shown"}
	ops[2].Monitor = operations.MonitorState{ProgressAt: at.Add(-12 * time.Minute), Attempts: 3, ErrorSince: at.Add(-2 * time.Minute),
		NextPoll: at.Add(80 * time.Second), LastError: "rpc error: code = Unavailable\ndesc = connection refused"}
	due := ops[0]
	due.ID = "op-4-b"
	due.Monitor = operations.MonitorState{ProgressAt: at.Add(-30 * time.Second), Attempts: 1, ErrorSince: at.Add(-40 * time.Second),
		NextPoll: at.Add(-5 * time.Second)}
	ops = append(ops, due)
	require.NoError(t, s.PutOperations(ctx, b, ops))
	_, err = s.UpdateRun(ctx, b, func(r *operations.Run) error {
		r.Errors = 1
		if err := r.SetPhase(phase.WaitingForPluginOperationsPartiallyFailed, "main run ended", created.Add(1200*time.Millisecond)); err != nil {
			return err
		}
		return r.SetPhase(phase.PartiallyFailed, "operation failed", created.Add(5*time.Second))
	})
	require.NoError(t, err)

	r := operations.Owner{Kind: phase.Restore, Name: "restore-1.1"}
	rrun := operations.Run{Owner: r, Phase: phase.New, Created: created.Add(time.Minute)}
	require.NoError(t, rrun.SetPhase(phase.InProgress, "restore started", created.Add(time.Minute)))
	require.NoError(t, s.CreateRun(ctx, rrun))
	_, err = s.UpdateRun(ctx, r, func(r *operations.Run) error {
		r.FailureReason = "found a restore with status \"InProgress\" during the server starting, mark it as \"Failed\""
		return r.SetPhase(phase.Failed, r.FailureReason, created.Add(2*time.Minute))
	})
	require.NoError(t, err)
	return path
}

func TestInspectStore(t *testing.T) {
	path := storeFile(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "every run",
			args: []string{"inspect", path},
			want: `boltstore ` + path + `: 2 runs (1 Backup, 1 Restore), 4 operations (1 New, 2 InProgress, 1 Failed)

RUN          KIND     PHASE            ITEMS  ERRORS  WARNINGS  OPERATIONS                                    CREATED  DURATION
backup-1.1   Backup   PartiallyFailed  40/40  1       0         4 operations (1 New, 2 InProgress, 1 Failed)  10m ago  5.00s
restore-1.1  Restore  Failed           0/0    0       0         0 operations                                  9m ago   1m

Backup backup-1.1: PartiallyFailed (UID uid-b)
  created 10m ago, profile default, operation timeout 5.00s

  AT      FROM                                       TO                                         EVENT                      REASON
  +0.00s  New                                        InProgress                                 start                      backup started
  +1.20s  InProgress                                 WaitingForPluginOperationsPartiallyFailed  wait-partially-failed      main run ended
  +5.00s  WaitingForPluginOperationsPartiallyFailed  FinalizingPartiallyFailed                  finalize-partially-failed  operation failed
  +5.00s  FinalizingPartiallyFailed                  PartiallyFailed                            complete-partially-failed  operation failed

  PLUGIN                       RESOURCE                                               OPERATION ID  PHASE       PROGRESS            STARTED    UPDATED   PROGRESSED  NEXT POLL  ERROR
  velero.io/csi-pvc-backupper  persistentvolumeclaims my-app/data-0                   op-1-b        InProgress  12% of 99999 Bytes  25m3s ago  10s ago   -           -          -
  example.io/snapshotter       volumesnapshots.snapshot.storage.k8s.io my-app/snap-0  snap-0-op-b   Failed      -                   2d1h ago   1d2h ago  1d3h ago    -          timed out\x0awaiting for\x09snapshot
  velero.io/csi-pvc-backupper  persistentvolumeclaims db/wal                          op-3-b        New         100% of 3           -          in 5s     12m ago     in 1m20s   retrying (3): rpc error: code = Unavailable\x0adesc = connection refused
  velero.io/csi-pvc-backupper  persistentvolumeclaims my-app/data-0                   op-4-b        InProgress  12% of 99999 Bytes  25m3s ago  10s ago   30s ago     due        retrying (1)

Restore restore-1.1: Failed
  created 9m ago, profile default, operation timeout the Monitor's default
  failure reason: found a restore with status "InProgress" during the server starting, mark it as "Failed"

  AT      FROM        TO          EVENT  REASON
  +0.00s  New         InProgress  start  restore started
  +1m     InProgress  Failed      fail   found a restore with status "InProgress" during the server starting, mark it as "Failed"
`,
		},
		{
			name: "one run",
			args: []string{"inspect", "-run", "restore-1.1", path},
			want: `boltstore ` + path + `: 1 run (0 Backup, 1 Restore), 0 operations

RUN          KIND     PHASE   ITEMS  ERRORS  WARNINGS  OPERATIONS    CREATED  DURATION
restore-1.1  Restore  Failed  0/0    0       0         0 operations  9m ago   1m

Restore restore-1.1: Failed
  created 9m ago, profile default, operation timeout the Monitor's default
  failure reason: found a restore with status "InProgress" during the server starting, mark it as "Failed"

  AT      FROM        TO          EVENT  REASON
  +0.00s  New         InProgress  start  restore started
  +1m     InProgress  Failed      fail   found a restore with status "InProgress" during the server starting, mark it as "Failed"
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fixNow(t)
			before := sha256File(t, path)
			info, err := os.Stat(path)
			require.NoError(t, err)
			code, stdout, stderr := runCmd(tc.args...)
			require.Equal(t, 0, code, "stderr: %s", stderr)
			if diff := cmp.Diff(tc.want, stdout); diff != "" {
				t.Errorf("inspect output (-want +got):\n%s", diff)
			}
			require.Equal(t, before, sha256File(t, path), "inspect changed the store file")
			after, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, info.ModTime(), after.ModTime())
		})
	}
}

// TestInspectSchema1Store inspects a store written by a release of schema 1: it reads
// through a migrated copy, and the file stays as it was.
func TestInspectSchema1Store(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("..", "..", "storage", "boltstore", "testdata", "schema1.db"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "schema1.db")
	require.NoError(t, os.WriteFile(path, old, 0o600))
	fixNow(t)
	code, stdout, stderr := runCmd("inspect", path)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	first, _, _ := strings.Cut(stdout, "\n")
	// The runs of storage/boltstore's fixtureRuns, which wrote the file.
	require.Equal(t, "boltstore "+path+": 5 runs (3 Backup, 2 Restore), 21 operations (7 New, 6 InProgress, 4 Completed, 4 Failed)", first)
	require.Equal(t, sha256.Sum256(old), sha256File(t, path), "inspect changed a file of schema 1")
}

func sha256File(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func TestInspectStoreFailures(t *testing.T) {
	t.Parallel()
	path := storeFile(t)
	empty := filepath.Join(t.TempDir(), "empty.db")
	s, err := boltstore.Open(empty, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	tests := []struct {
		name     string
		args     func(t *testing.T) []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{
			name: "a store in use",
			args: func(t *testing.T) []string {
				s, err := boltstore.Open(path, nil)
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return []string{"inspect", path}
			},
			wantCode: 1,
			wantErr:  "file is locked by another store (gave up after waiting 1s); another process is writing to the store",
		},
		{
			name:     "no such run",
			args:     func(t *testing.T) []string { return []string{"inspect", "-run", "backup-9.9", path} },
			wantCode: 1,
			wantErr:  `no run named "backup-9.9"`,
		},
		{
			name:     "-run on an operations file",
			args:     func(t *testing.T) []string { return []string{"inspect", "-run", "x", writeFile(t, backupOps())} },
			wantCode: 2,
			wantErr:  "-run and -o json apply to stores only",
		},
		{
			name:     "an empty store",
			args:     func(t *testing.T) []string { return []string{"inspect", empty} },
			wantCode: 0,
			wantOut:  "boltstore " + empty + ": 0 runs (0 Backup, 0 Restore), 0 operations\n",
		},
		{
			name: "a store another reader has open",
			args: func(t *testing.T) []string {
				s, err := boltstore.Open(empty, &boltstore.Options{ReadOnly: true})
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				return []string{"inspect", empty}
			},
			wantCode: 0,
			wantOut:  "boltstore " + empty + ": 0 runs (0 Backup, 0 Restore), 0 operations\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(tc.args(t)...)
			require.Equal(t, tc.wantCode, code, "stderr: %s", stderr)
			require.Equal(t, tc.wantOut, stdout)
			require.Contains(t, stderr, tc.wantErr)
		})
	}
}

func TestIsBolt(t *testing.T) {
	path := storeFile(t)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, isBolt(b[:headSize]))
	var gz []byte
	gz = append(gz, gzipForTest(t, []byte("[]\n"))...)
	require.False(t, isBolt(gz))
	require.False(t, isBolt(b[:19]), "too short to tell")
}
