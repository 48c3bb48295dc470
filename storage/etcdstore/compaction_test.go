package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
)

// TestDatabaseStaysFlat runs Monitor passes that write every operation of 20 runs, again
// and again, on an etcd set up as the package documentation recommends (periodic
// auto-compaction; a second here, so that the test sees several): the space the database
// uses stops growing. It logs the revisions and the growth per pass.
func TestDatabaseStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs passes for 9 s (-short)")
	}
	const runs, perRun = 20, 10
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{NoFsync: true, AutoCompaction: time.Second})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s := etcdstore.OpenStore(t, c, etcdstore.NewPrefix(), nil)
	seed(t, s, runs, perRun)
	plugin := &scalebench.Moving{}
	m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return plugin, nil }))

	status := func() (rev, inUse int64) {
		t.Helper()
		st, err := c.Status(context.Background(), srv.Endpoint())
		require.NoError(t, err)
		return st.Header.Revision, st.DbSizeInUse
	}
	pass := func() {
		t.Helper()
		st, err := m.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, runs*perRun, st.Operations, "operations polled")
	}
	// Warm up for three compaction periods (on a loaded machine two can leave the
	// database still filling, so that it keeps growing after them; docs/BENCHMARKS.md,
	// "Revisions and database growth per pass"), then measure over six more.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		pass()
	}
	rev0, size0 := status()
	passes := 0
	high := size0
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); passes++ {
		pass()
		if passes%10 == 0 {
			_, size := status()
			high = max(high, size)
		}
	}
	rev1, size1 := status()
	written := rev1 - rev0
	t.Logf("%d passes: %.1f revisions per pass (%d runs), database in use %d -> %d bytes (at most %d), %+.0f bytes per pass",
		passes, float64(written)/float64(passes), runs, size0, size1, high, float64(size1-size0)/float64(passes))
	// Without compaction each revision keeps its values, and the same passes grow the
	// database several times over (docs/BENCHMARKS.md, "Revisions and database growth
	// per pass"); with it the space freed by one compaction is reused until the next.
	require.Greater(t, written, int64(passes*runs), "revisions written")
	// The bound is twice the size before the passes: where compaction falls among the
	// samples moves the highest one, more on a loaded machine, and without compaction the
	// same passes go well past it (the section named above has the figures).
	require.LessOrEqual(t, high, size0*2, "database in use grew from %d to %d bytes over %d passes", size0, high, passes)
}
