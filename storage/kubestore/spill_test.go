package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

var (
	runsGVR   = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopsruns"}
	chunksGVR = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopschunks"}
)

// t0 is the time of every record the tests here write.
var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

// testOps returns n operations of o, each with a description of its own that gzip does
// not shrink to nothing, in phase p.
func testOps(o operations.Owner, n int, p operations.OperationPhase) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		id := fmt.Sprintf("op-%05d", i)
		ops[i] = operations.Operation{
			Owner: o, Action: "example.io/snapshotter", ID: id,
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			Status: operations.Status{
				Phase: p, NCompleted: int64(i), NTotal: 10_000, Created: t0,
				Description: fmt.Sprintf("copying volume %x of %x", i*7919, i*104729),
			},
		}
	}
	return ops
}

// waitingRun returns a run of o waiting for its plugin operations.
func waitingRun(t *testing.T, o operations.Owner) operations.Run {
	t.Helper()
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "test", t0); err != nil {
		t.Fatalf("SetPhase: %v", err)
	}
	return r
}

// count returns how many objects of res namespace ns holds.
func count(t *testing.T, cfg *rest.Config, res schema.GroupVersionResource, ns string) int {
	t.Helper()
	l, err := dynamic.NewForConfigOrDie(cfg).Resource(res).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s: %v", res.Resource, err)
	}
	return len(l.Items)
}

// listOps returns the operations of o in s.
func listOps(t *testing.T, s operations.Store, o operations.Owner) []operations.Operation {
	t.Helper()
	ops, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
	if err != nil {
		t.Fatalf("ListOperations(%s): %v", o, err)
	}
	return ops
}

// TestTenThousandOperationsInOneRun stores 10,000 operations in one run with the default
// options, which spills them into chunks, reads them back, changes a hundred of them and
// reads them back again, each time as written.
func TestTenThousandOperationsInOneRun(t *testing.T) {
	ctx := context.Background()
	s, cfg, ns := newStoreIn(t, nil)
	o := operations.Owner{Kind: phase.Backup, Name: "big", UID: "uid-big"}
	ops := testOps(o, 10_000, operations.OperationInProgress)
	if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	if n := count(t, cfg, chunksGVR, ns); n < 3 { // the format marker and at least two chunks
		t.Fatalf("the namespace holds %d ItemopsChunks, want the marker and chunks", n)
	}
	if diff := cmp.Diff(ops, listOps(t, s, o), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("ListOperations after the batch (-want +got):\n%s", diff)
	}
	var changed []operations.Operation
	for i := 0; i < len(ops); i += 100 {
		ops[i].Status.Phase = operations.OperationCompleted
		ops[i].Status.NCompleted = ops[i].Status.NTotal
		changed = append(changed, ops[i])
	}
	if err := s.PutOperations(ctx, o, changed); err != nil {
		t.Fatalf("PutOperations: %v", err)
	}
	if diff := cmp.Diff(ops, listOps(t, s, o), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("ListOperations after the second batch (-want +got):\n%s", diff)
	}
}

// failing is an http.RoundTripper that fails the requests that match fail while armed.
type failing struct {
	next  http.RoundTripper
	armed atomic.Bool
	fail  func(*http.Request) bool
}

var errInjected = errors.New("injected failure")

func (f *failing) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.armed.Load() && f.fail(req) {
		return nil, errInjected
	}
	return f.next.RoundTrip(req)
}

// isWrite reports whether req writes (verb) an object of resource (itemopsruns,
// itemopschunks).
func isWrite(req *http.Request, verb, resource string) bool {
	return req.Method == verb && strings.Contains(req.URL.Path, "/"+resource)
}

// TestFailedCommitPointLeavesNothingVisible fails the write of the run's object, the
// commit point, of a batch that spills: creating a run, and changing a spilled run,
// with the chunks the commit created deleted afterwards or left behind (a writer that
// died). Each time the store reads as before the commit.
func TestFailedCommitPointLeavesNothingVisible(t *testing.T) {
	for _, tc := range []struct {
		name string
		// deletes says whether the writer deletes its chunks after the failed write.
		deletes bool
	}{
		{"ChunksDeleted", true},
		{"ChunksLeftBehind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
			check, cfg, ns := newStoreIn(t, opts)
			f := &failing{fail: func(req *http.Request) bool {
				return isWrite(req, http.MethodPut, "itemopsruns") || !tc.deletes && isWrite(req, http.MethodDelete, "itemopschunks")
			}}
			faulty := userConfig(t)
			faulty.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f }
			s, err := kubestore.Open(ctx, faulty, ns, opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}

			fresh := operations.Owner{Kind: phase.Backup, Name: "fresh", UID: "uid-fresh"}
			f.armed.Store(true)
			err = s.CreateRunWithOperations(ctx, waitingRun(t, fresh), testOps(fresh, 1000, operations.OperationInProgress))
			f.armed.Store(false)
			if !errors.Is(err, errInjected) {
				t.Fatalf("CreateRunWithOperations with its commit point failing: %v, want the injected failure", err)
			}
			if _, err := check.GetRun(ctx, fresh); !errors.Is(err, operations.ErrNotFound) {
				t.Errorf("GetRun of the run whose creation failed: %v, want ErrNotFound", err)
			}
			runs, err := check.ListRuns(ctx, operations.RunFilter{})
			if err != nil || len(runs) != 0 {
				t.Errorf("ListRuns after the failed creation = %d runs, %v; want none", len(runs), err)
			}
			if ops, err := check.ListOperations(ctx, fresh, operations.OperationFilter{}); !errors.Is(err, operations.ErrNotFound) {
				t.Errorf("ListOperations of the run whose creation failed = %d operations, %v; want ErrNotFound", len(ops), err)
			}

			// The creation goes through once nothing fails, over what the failed one left.
			o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
			ops := testOps(o, 1000, operations.OperationInProgress)
			if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
				t.Fatalf("CreateRunWithOperations: %v", err)
			}
			chunks := count(t, cfg, chunksGVR, ns)
			changed := testOps(o, 1000, operations.OperationCompleted)
			f.armed.Store(true)
			err = s.PutOperations(ctx, o, changed)
			f.armed.Store(false)
			if !errors.Is(err, errInjected) {
				t.Fatalf("PutOperations with its commit point failing: %v, want the injected failure", err)
			}
			if diff := cmp.Diff(ops, listOps(t, check, o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations after the failed batch (-want +got):\n%s", diff)
			}
			switch n := count(t, cfg, chunksGVR, ns); {
			case tc.deletes && n != chunks:
				t.Errorf("the failed batch left %d ItemopsChunks, want the %d from before it", n, chunks)
			case !tc.deletes && n <= chunks:
				t.Errorf("the failed batch left %d ItemopsChunks, want more than the %d from before it (its own)", n, chunks)
			}
			if err := s.PutOperations(ctx, o, changed); err != nil {
				t.Fatalf("PutOperations: %v", err)
			}
			if diff := cmp.Diff(changed, listOps(t, check, o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations after the batch (-want +got):\n%s", diff)
			}
		})
	}
}
