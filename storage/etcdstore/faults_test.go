package etcdstore

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
	"github.com/itemops/itemops/storage/faulttest"
)

// TestFaults runs the fault harness of package storage/faulttest on etcd: three
// replicas, each with a client of its own whose requests pass through faultInterceptor,
// share a prefix, with limits that make the engine write most batches in several
// transactions. The etcd server is a process of the test's own, which the harness
// pauses (SIGSTOP) and kills and restarts (SIGKILL) while the workload runs. See
// faulttest's documentation for the workload, the checks, and ITEMOPS_FAULT_SEED and
// ITEMOPS_FAULT_OPS, which replay a failure and set its length.
func TestFaults(t *testing.T) {
	p, err := etcdtest.StartProcess(serverBin, t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	srv := processServer{p}
	t.Cleanup(func() {
		_ = srv.Resume() // in case the harness failed within a pause
		p.Stop()
	})
	prefix := newPrefix()
	faulttest.Run(t, faulttest.Config{
		Open: func(i int, faults *faulttest.Faults) (operations.Store, error) {
			c, err := clientv3.New(clientv3.Config{
				Endpoints:   []string{p.Endpoint()},
				DialTimeout: 5 * time.Second,
				Logger:      zap.NewNop(),
				DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(faultInterceptor(faults))},
			})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { c.Close() })
			return openStore(t, c, prefix, small()), nil
		},
		Fresh: func() (operations.Store, error) {
			return openStore(t, newClient(t, p), prefix, nil), nil
		},
		Server: srv,
	})
}

// processServer is faulttest's Server over an etcd server's process.
type processServer struct{ p *etcdtest.Process }

func (s processServer) Pause() error  { return s.signal(syscall.SIGSTOP) }
func (s processServer) Resume() error { return s.signal(syscall.SIGCONT) }

func (s processServer) Restart() error {
	s.p.Kill()
	return s.p.Restart()
}

func (s processServer) signal(sig syscall.Signal) error {
	pid := s.p.Pid()
	if pid <= 0 { // never 0: kill(0) would signal the test's own process group
		return fmt.Errorf("signal %v: the etcd server is not running", sig)
	}
	return syscall.Kill(pid, sig)
}

// faultInterceptor is a gRPC interceptor that does to each unary request to etcd what
// faults decides: it delays it; sends it and loses etcd's answer (Unavailable, as a
// connection that closes after the server applied the request); refuses it unsent
// (ResourceExhausted for a 429, else Unavailable); or fails it unsent as a reset
// connection (Unavailable). The etcd client puts its own retries outside it, so each
// attempt is a request of its own. Streams (watches, lease keep-alives) are not
// faulted.
//
// A lost answer is never DeadlineExceeded. The etcd client sends any request again,
// a write transaction included, when an attempt fails with DeadlineExceeded while the
// caller's context is still alive; the second sending then finds the first one's write
// and fails its compare, and the store takes its own write for a concurrent one (the
// harness found it: an UpdateRun that returned its update function's error for a
// write that was applied). etcd sends no such status while the store's context is
// alive: the store gives each request a deadline (Options.RequestTimeout) that the
// server's copy of it, which starts later, cannot pass first. Only a proxy between the
// client and etcd that sends DeadlineExceeded on its own could; storage/etcdstore's
// doc says so.
func faultInterceptor(faults *faulttest.Faults) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		f := faults.Next()
		switch f.Kind {
		case faulttest.Delay:
			select {
			case <-time.After(f.Wait):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		case faulttest.LoseAnswer:
			if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "fault injected: answer lost after etcd applied the request")
		case faulttest.Refuse:
			if f.Status == http.StatusTooManyRequests {
				return status.Error(codes.ResourceExhausted, "fault injected: request refused")
			}
			return status.Error(codes.Unavailable, "fault injected: request refused")
		case faulttest.Reset:
			return status.Error(codes.Unavailable, "fault injected: connection reset")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
