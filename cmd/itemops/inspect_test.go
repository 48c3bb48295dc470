package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
)

// at is the time the tests run inspect at.
var at = time.Date(2022, 12, 14, 12, 30, 0, 0, time.UTC)

// fixNow makes inspect measure ages from at for the rest of the test.
func fixNow(t *testing.T) {
	t.Helper()
	saved := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = saved })
}

// writeFile writes ops with the library's encoder to a file in a temporary directory
// and returns its path.
func writeFile(t *testing.T, ops []operations.Operation) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, opsfile.Encode(&buf, ops))
	return writeBytes(t, buf.Bytes())
}

func writeBytes(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "itemoperations.json.gz")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

func backupOps() []operations.Operation {
	owner := operations.Owner{Kind: phase.Backup, Name: "backup-1", UID: "f8c72709-0f73-46e1-a071-116bc4a76b07"}
	return []operations.Operation{{
		Owner:    owner,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "my-app", Name: "data-0"},
		ID:       "op-1",
		Status: operations.Status{
			Phase: operations.OperationInProgress, NCompleted: 12345, NTotal: 99999, OperationUnits: "Bytes",
			Created: at.Add(-time.Hour), Started: at.Add(-25*time.Minute - 3*time.Second), Updated: at.Add(-10 * time.Second),
		},
	}, {
		Owner:    owner,
		Action:   "example.io/snapshotter",
		Resource: operations.ResourceIdentifier{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "my-app", Name: "snap-0"},
		ID:       "snap-0-op",
		Status: operations.Status{
			Phase: operations.OperationFailed, Error: "timed out\nwaiting for\tsnapshot",
			Created: at.Add(-50 * time.Hour), Started: at.Add(-49 * time.Hour), Updated: at.Add(-26*time.Hour - 5*time.Minute),
		},
	}, {
		Owner:    owner,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "db", Name: "wal"},
		ID:       "op-3",
		Status:   operations.Status{Phase: operations.OperationNew, NTotal: 3, NCompleted: 3, Created: at, Updated: at.Add(5 * time.Second)},
	}}
}

func TestInspect(t *testing.T) {
	restore := backupOps()[:1]
	restore[0].Owner = operations.Owner{Kind: phase.Restore, Name: "restore-1"}
	restore[0].Action = "velero.io/csi-pvc-restorer"
	restore[0].Status = operations.Status{Phase: operations.OperationCompleted, NCompleted: 1, NTotal: 8, OperationUnits: "Bytes", Created: at}
	twoOwners := backupOps()[:2]
	twoOwners[1].Owner.Name, twoOwners[1].Owner.UID = "backup-2", ""

	tests := []struct {
		name string
		ops  []operations.Operation
		want string
	}{
		{
			name: "backup",
			ops:  backupOps(),
			want: `Backup backup-1 (UID f8c72709-0f73-46e1-a071-116bc4a76b07): 3 operations (1 New, 1 InProgress, 1 Failed)

PLUGIN                       RESOURCE                                               OPERATION ID  PHASE       PROGRESS            STARTED    UPDATED   ERROR
velero.io/csi-pvc-backupper  persistentvolumeclaims my-app/data-0                   op-1          InProgress  12% of 99999 Bytes  25m3s ago  10s ago   -
example.io/snapshotter       volumesnapshots.snapshot.storage.k8s.io my-app/snap-0  snap-0-op     Failed      -                   2d1h ago   1d2h ago  timed out\x0awaiting for\x09snapshot
velero.io/csi-pvc-backupper  persistentvolumeclaims db/wal                          op-3          New         100% of 3           -          in 5s     -
`,
		},
		{
			name: "restore, detected from the content",
			ops:  restore,
			want: `Restore restore-1: 1 operation (1 Completed)

PLUGIN                      RESOURCE                              OPERATION ID  PHASE      PROGRESS        STARTED  UPDATED  ERROR
velero.io/csi-pvc-restorer  persistentvolumeclaims my-app/data-0  op-1          Completed  12% of 8 Bytes  -        -        -
`,
		},
		{
			name: "operations of two backups",
			ops:  twoOwners,
			want: `Backup operations of 2 owners (backup-1, backup-2): 2 operations (1 InProgress, 1 Failed)

PLUGIN                       RESOURCE                                               OPERATION ID  PHASE       PROGRESS            STARTED    UPDATED   ERROR
velero.io/csi-pvc-backupper  persistentvolumeclaims my-app/data-0                   op-1          InProgress  12% of 99999 Bytes  25m3s ago  10s ago   -
example.io/snapshotter       volumesnapshots.snapshot.storage.k8s.io my-app/snap-0  snap-0-op     Failed      -                   2d1h ago   1d2h ago  timed out\x0awaiting for\x09snapshot
`,
		},
		{
			name: "no operations",
			ops:  nil,
			want: "empty operations file: 0 operations\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fixNow(t)
			path := writeFile(t, tc.ops)
			var stdout, stderr bytes.Buffer
			code := run([]string{"inspect", path}, &stdout, &stderr)
			require.Equal(t, 0, code, "stderr: %s", stderr.String())
			require.Empty(t, stderr.String())
			if diff := cmp.Diff(tc.want, stdout.String()); diff != "" {
				t.Errorf("inspect output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInspectFailures(t *testing.T) {
	var file bytes.Buffer
	require.NoError(t, opsfile.Encode(&file, backupOps()))
	full := file.Bytes()
	missing := filepath.Join(t.TempDir(), "missing.json.gz")

	tests := []struct {
		name     string
		args     func(t *testing.T) []string
		wantCode int
		wantErr  []string // in stderr
	}{
		{
			name:     "truncated file",
			args:     func(t *testing.T) []string { return []string{"inspect", writeBytes(t, full[:len(full)-6])} },
			wantCode: 1,
			wantErr:  []string{"itemops inspect: ", "itemoperations.json.gz: decode operations: json offset", "the gzip data is truncated"},
		},
		{
			name: "a record with an unknown phase",
			args: func(t *testing.T) []string {
				ops := backupOps()
				ops[2].Status.Phase = operations.OperationCompleted
				var buf bytes.Buffer
				require.NoError(t, opsfile.Encode(&buf, ops))
				text := strings.Replace(string(gunzipForTest(t, buf.Bytes())), `"phase":"Completed"`, `"phase":"Done"`, 1)
				return []string{"inspect", writeBytes(t, gzipForTest(t, []byte(text)))}
			},
			wantCode: 1,
			wantErr:  []string{"decode operations: record 2 at json offset", `unknown phase "Done"`},
		},
		{
			name: "a record with a negative progress count",
			args: func(t *testing.T) []string {
				ops := backupOps()
				var buf bytes.Buffer
				require.NoError(t, opsfile.Encode(&buf, ops))
				text := strings.Replace(string(gunzipForTest(t, buf.Bytes())), `"nTotal":99999`, `"nTotal":-9223372036854775808`, 1)
				require.Contains(t, text, "-9223372036854775808", "the test's edit missed")
				return []string{"inspect", writeBytes(t, gzipForTest(t, []byte(text)))}
			},
			wantCode: 1,
			wantErr:  []string{"decode operations: record 0 at json offset", "negative progress (12345 of -9223372036854775808)"},
		},
		{
			name:     "not gzip",
			args:     func(t *testing.T) []string { return []string{"inspect", writeBytes(t, []byte("[]\n"))} },
			wantCode: 1,
			wantErr:  []string{"decode operations: json offset 0: malformed operations file: not gzip data"},
		},
		{
			name:     "empty file",
			args:     func(t *testing.T) []string { return []string{"inspect", writeBytes(t, nil)} },
			wantCode: 1,
			wantErr:  []string{"empty input, want gzip data"},
		},
		{
			name:     "missing file",
			args:     func(t *testing.T) []string { return []string{"inspect", missing} },
			wantCode: 1,
			wantErr:  []string{"no such file or directory"},
		},
		{
			name:     "no file",
			args:     func(t *testing.T) []string { return []string{"inspect"} },
			wantCode: 2,
			wantErr:  []string{"want one FILE or STORE, got 0 arguments"},
		},
		{
			name:     "two files",
			args:     func(t *testing.T) []string { return []string{"inspect", "a", "b"} },
			wantCode: 2,
			wantErr:  []string{"want one FILE or STORE, got 2 arguments"},
		},
		{
			name:     "unknown flag",
			args:     func(t *testing.T) []string { return []string{"inspect", "-x", "a"} },
			wantCode: 2,
			wantErr:  []string{"flag provided but not defined: -x"},
		},
		{
			name:     "help",
			args:     func(t *testing.T) []string { return []string{"inspect", "-h"} },
			wantCode: 0,
			wantErr:  []string{"usage: itemops inspect [-run NAME] [-o text|json] [store flags] FILE|STORE"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args(t), &stdout, &stderr)
			require.Equal(t, tc.wantCode, code, "stderr: %s", stderr.String())
			require.Empty(t, stdout.String(), "a failed inspect printed rows")
			for _, want := range tc.wantErr {
				require.Contains(t, stderr.String(), want)
			}
		})
	}
}

// TestAge shows times before and after the time inspect runs at, the zero time, and
// times so far off that their distance overflows a time.Duration (292 years).
func TestAge(t *testing.T) {
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{at.Add(-5 * time.Second), "5s ago"},
		{at.Add(10 * time.Second), "in 10s"},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "in more than 292 years"},
		{time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), "more than 292 years ago"},
	}
	for _, tc := range tests {
		if got := age(at, tc.t); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestUntil shows a next poll at every side of the time inspect runs at: past and at
// it are due, under a second ahead is not yet, and a distance that overflows a
// time.Duration is named as such.
func TestUntil(t *testing.T) {
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{at.Add(-time.Hour), "due"},
		{at, "due"},
		{at.Add(time.Nanosecond), "in <1s"},
		{at.Add(time.Second - time.Nanosecond), "in <1s"},
		{at.Add(time.Second), "in 1s"},
		{at.Add(80 * time.Second), "in 1m20s"},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), "in more than 292 years"},
	}
	for _, tc := range tests {
		if got := until(at, tc.t); got != tc.want {
			t.Errorf("until(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{999 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{5 * time.Minute, "5m"},
		{5*time.Minute + 3*time.Second, "5m3s"},
		{3 * time.Hour, "3h"},
		{3*time.Hour + 59*time.Minute + 59*time.Second, "3h59m"},
		{48 * time.Hour, "2d"},
		{50*time.Hour + 30*time.Minute, "2d2h"},
	}
	for _, tc := range tests {
		if got := duration(tc.d); got != tc.want {
			t.Errorf("duration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		name string
		s    operations.Status
		want string
	}{
		{"no total", operations.Status{NCompleted: 5}, "-"},
		{"rounded down", operations.Status{NCompleted: 12345, NTotal: 99999, OperationUnits: "Bytes"}, "12% of 99999 Bytes"},
		{"almost done is not done", operations.Status{NCompleted: 999, NTotal: 1000}, "99% of 1000"},
		{"done", operations.Status{NCompleted: 1000, NTotal: 1000, OperationUnits: "Items"}, "100% of 1000 Items"},
		{"beyond the total", operations.Status{NCompleted: 3, NTotal: 2}, "150% of 2"},
		{"huge numbers", operations.Status{NCompleted: 1 << 62, NTotal: 1<<63 - 1}, "50% of 9223372036854775807"},
		{"units with a newline", operations.Status{NCompleted: 1, NTotal: 2, OperationUnits: "a\nb"}, `50% of 2 a\x0ab`},
	}
	for _, tc := range tests {
		if got := progressText(tc.s); got != tc.want {
			t.Errorf("%s: progressText = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func gzipForTest(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func gunzipForTest(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// manyOwners returns n operations, each of a backup of its own.
func manyOwners(n int) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = operations.Operation{
			Owner:  operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%06d", i)},
			Action: "velero.io/csi-pvc-backupper", ID: fmt.Sprintf("op-%06d", i),
			Status: operations.Status{Phase: operations.OperationInProgress, Created: at},
		}
	}
	return ops
}

// TestInspectManyOwners inspects a file whose 20,000 operations each belong to an owner
// of their own: the header counts them and names the first five only, and every
// operation has its row. (How the time grows with the owners is in BenchmarkInspectOwners.)
func TestInspectManyOwners(t *testing.T) {
	t.Parallel() // nothing it checks depends on the time
	const n = 20000
	path := writeFile(t, manyOwners(n))
	status, out, errOut := runCLI("inspect", path)
	require.Equal(t, 0, status, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "Backup operations of 20000 owners (backup-000000, backup-000001, backup-000002, backup-000003, backup-000004 and 19995 more): 20000 operations (20000 InProgress)", lines[0])
	require.Len(t, lines, 1+1+1+n, "the header, a blank line, the table's header and a row per operation")
}

// TestInspectSanitisesOwners inspects files whose owner names and UID hold ESC, a
// newline and NUL: the header shows them escaped, as the table's cells do, so nothing
// reaches the terminal raw.
func TestInspectSanitisesOwners(t *testing.T) {
	fixNow(t)
	one := backupOps()[:1]
	one[0].Owner.Name, one[0].Owner.UID = "evil\x1b[2J\nname\x00", "uid\x1b]0;title\a"
	two := backupOps()[:2]
	two[1].Owner.Name = "second\x1b[31m\r\nowner"
	for _, ops := range [][]operations.Operation{one, two} {
		status, out, errOut := runCLI("inspect", writeFile(t, ops))
		require.Equal(t, 0, status, errOut)
		header, _, _ := strings.Cut(out, "\n")
		require.NotContains(t, out, "\x1b")
		require.NotContains(t, out, "\x00")
		require.NotContains(t, out, "\a")
		require.NotContains(t, out, "\r")
		t.Logf("%q", header)
	}
	status, out, _ := runCLI("inspect", writeFile(t, one))
	require.Equal(t, 0, status)
	require.True(t, strings.HasPrefix(out, `Backup evil\x1b[2J\x0aname\x00 (UID uid\x1b]0;title\x07): 1 operation`), "header %q", out)
}

// BenchmarkInspectOwners inspects files of n operations, each of an owner of its own.
func BenchmarkInspectOwners(b *testing.B) {
	for _, n := range []int{20000, 40000, 80000} {
		b.Run(fmt.Sprintf("owners=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			if err := opsfile.Encode(&buf, manyOwners(n)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := inspectOperations(bytes.NewReader(buf.Bytes()), "bench", io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
