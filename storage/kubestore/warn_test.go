package kubestore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/itemops/itemops/internal/testutil/logrec"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/storage/kubestore"
)

// TestMonitorWarnsWithoutLeaseRights runs a Monitor on a store whose Role grants all
// that kubestore.RBAC's does but list and watch on Leases, as docs/operators.md
// describes it: the Monitor's passes go on, and after each, Run logs the API server's
// Forbidden as a warning, "claims not shared with other replicas".
func TestMonitorWarnsWithoutLeaseRights(t *testing.T) {
	admin := config(t)
	ns := newNamespace(t, admin)
	grant(t, admin, ns, without(without(shippedRole(t), right{"leases", "list"}), right{"leases", "watch"}))
	s, err := kubestore.Open(context.Background(), userConfig(t), ns, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()

	logger, logs := logrec.Logger()
	passes := make(chan monitor.PassStats, 64)
	m := monitor.New(s, operationstest.Resolver(nil), monitor.WithInterval(10*time.Millisecond), monitor.WithLogger(logger),
		monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) {
			select {
			case passes <- st:
			default:
			}
		}}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- m.Run(ctx) }()
	// Two warnings, or a minute; the assertions below say which.
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(logs.At(slog.LevelWarn)) >= 2, nil
	})
	cancel()
	<-stopped
	close(passes)

	warnings := logs.At(slog.LevelWarn)
	if len(warnings) < 2 {
		t.Fatalf("warnings logged = %q, want one after each pass, two at least", warnings)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "claims not shared with other replicas") || !strings.Contains(w, "forbidden") {
			t.Errorf("warning %q, want it to say that the claims are not shared, and the API server's Forbidden", w)
		}
	}
	n := 0
	for st := range passes {
		n++
		if st.Err != nil {
			t.Errorf("pass %d failed: %v; want the passes to go on without the rights", n, st.Err)
		}
	}
	if n < 2 {
		t.Errorf("the Monitor made %d passes, want two at least", n)
	}
}
