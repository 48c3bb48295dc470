package etcdstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

var (
	bg = context.Background()
	t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
)

// small are limits that make the engine stage every batch of more than a few
// operations, in many transactions.
func small() *Options { return &Options{MaxTxnOps: minTxnOps * 2, MaxRequestBytes: minRequestBytes} }

func backup(name string) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
}

// createWaiting creates a run of o waiting for its operations.
func createWaiting(t testing.TB, s operations.Store, o operations.Owner) operations.Run {
	t.Helper()
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "fixture", t0))
	require.NoError(t, s.CreateRun(bg, r), "CreateRun(%s)", o)
	return r
}

// newOps returns n operations of o in phase p with IDs prefix0000, prefix0001, ...
func newOps(o operations.Owner, prefix string, n int, p operations.OperationPhase) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		id := fmt.Sprintf("%s%04d", prefix, i)
		ops[i] = operations.Operation{
			Owner: o, Action: "example.io/mover", ID: id,
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			Status: operations.Status{Phase: p, NCompleted: int64(i), NTotal: int64(n), OperationUnits: "Bytes",
				Description: "copying " + id, Created: t0, Started: t0.Add(time.Minute)},
		}
	}
	return ops
}

func ids(ops []operations.Operation) []string {
	out := make([]string, len(ops))
	for i := range ops {
		out[i] = ops[i].ID
	}
	return out
}

// listIDs returns the IDs ListOperations(o, f) returns.
func listIDs(t testing.TB, s operations.Store, o operations.Owner, phases ...operations.OperationPhase) []string {
	t.Helper()
	got, err := s.ListOperations(bg, o, operations.OperationFilter{Phases: phases})
	require.NoError(t, err, "ListOperations(%s, %v)", o, phases)
	return ids(got)
}

// rawKeys returns the keys under prefix, without it, in order.
func rawKeys(t testing.TB, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(bg, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	out := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = strings.TrimPrefix(string(kv.Key), prefix)
	}
	return out
}

// countKeys counts the keys under prefix.
func countKeys(t testing.TB, c *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := c.Get(bg, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}
