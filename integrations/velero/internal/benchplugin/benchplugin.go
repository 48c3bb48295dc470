// Package benchplugin is a Velero BackupItemAction v2 for the module's benchmarks: its
// Progress answers every operation at once (or after a delay read from the environment)
// with a report that has moved on and never completes, so that every poll of every
// operation is a real gRPC round trip to another process and a change to write.
// internal/cmd/benchplugin serves it through Velero's plugin framework.
package benchplugin

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"
	biav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/backupitemaction/v2"
)

// Name is the name the action is registered under.
const Name = "itemops.io/bench-progress"

// DelayEnv names the environment variable that holds how long each Progress call
// waits before it answers, in time.ParseDuration's syntax ("2ms"); unset or empty is
// no wait. The plugin process inherits it from the process that starts it.
const DelayEnv = "ITEMOPS_BENCH_PLUGIN_DELAY"

// CPUOperationID is an operation ID that asks the plugin process for the CPU time it
// has used: Progress answers it at once, with ProcessCPU in nanoseconds as the
// report's Description.
const CPUOperationID = "itemops-bench-cpu"

// Started is the start time every report gives.
var Started = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// Serve serves the action through Velero's plugin framework until the process that
// started the plugin goes away. It fails, before serving, when DelayEnv holds no
// duration or a negative one.
func Serve() error {
	delay, err := delayFromEnv()
	if err != nil {
		return err
	}
	framework.NewServer().
		RegisterBackupItemActionV2(Name, func(logrus.FieldLogger) (any, error) { return &action{delay: delay}, nil }).
		Serve()
	return nil
}

func delayFromEnv() (time.Duration, error) {
	s := os.Getenv(DelayEnv)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("benchplugin: %s=%q is not a duration of zero or more", DelayEnv, s)
	}
	return d, nil
}

// action reports progress for any operation ID. It is safe for concurrent use: Velero's
// plugin server calls it from a goroutine per request.
type action struct {
	delay time.Duration
	calls atomic.Int64
}

var _ biav2.BackupItemAction = (*action)(nil)

func (a *action) Name() string { return Name }

func (a *action) AppliesTo() (vplugin.ResourceSelector, error) {
	return vplugin.ResourceSelector{}, nil
}

// Execute returns the item unchanged and starts no operation: the benchmarks create
// their operations themselves.
func (a *action) Execute(item runtime.Unstructured, _ *velerov1api.Backup) (runtime.Unstructured, []vplugin.ResourceIdentifier, string, []vplugin.ResourceIdentifier, error) {
	return item, nil, "", nil, nil
}

// Progress waits for the delay, then reports one more unit done than the call before
// it, out of a total it never reaches; for CPUOperationID it reports the process's CPU
// time instead.
func (a *action) Progress(operationID string, _ *velerov1api.Backup) (vplugin.OperationProgress, error) {
	if operationID == CPUOperationID {
		return vplugin.OperationProgress{Description: strconv.FormatInt(int64(ProcessCPU()), 10)}, nil
	}
	if a.delay > 0 {
		time.Sleep(a.delay)
	}
	return vplugin.OperationProgress{
		NCompleted:     a.calls.Add(1),
		NTotal:         1 << 50,
		OperationUnits: "Bytes",
		Started:        Started,
		Updated:        time.Now(),
	}, nil
}

// Cancel does nothing: the operations never run past their timeout in a benchmark.
func (a *action) Cancel(string, *velerov1api.Backup) error { return nil }
