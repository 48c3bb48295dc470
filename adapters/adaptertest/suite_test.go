package adaptertest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
)

// tweaked is a backup item action that breaks the contract in one way: each hook, when
// set, replaces the data mover's method.
type tweaked struct {
	adapters.BackupItemAction[string]
	name     string
	execute  func(id string) string
	progress func(p operations.Progress, err error, n int) (operations.Progress, error)
	cancel   func(ctx context.Context, id string) error

	progressCalls int
}

func (a *tweaked) Name() string { return a.name }

func (a *tweaked) Execute(ctx context.Context, item runtime.Unstructured, b string) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	u, add, id, post, err := a.BackupItemAction.Execute(ctx, item, b)
	if a.execute != nil {
		id = a.execute(id)
	}
	return u, add, id, post, err
}

func (a *tweaked) Progress(ctx context.Context, id string, b string) (operations.Progress, error) {
	p, err := a.BackupItemAction.Progress(ctx, id, b)
	a.progressCalls++
	if a.progress != nil {
		return a.progress(p, err, a.progressCalls)
	}
	return p, err
}

func (a *tweaked) Cancel(ctx context.Context, id string, b string) error {
	if a.cancel != nil {
		return a.cancel(ctx, id)
	}
	return a.BackupItemAction.Cancel(ctx, id, b)
}

// broken lists plugins that each break one rule, and the subtests of the suite that
// must fail on it.
var broken = map[string]struct {
	tweak    func(a *tweaked)
	noFinish bool // run as a plugin without operations
	wantFail []string
}{
	"empty name": {
		tweak:    func(a *tweaked) { a.name = "" },
		wantFail: []string{"NameNotEmpty"},
	},
	"unknown ID reported as fine": {
		tweak: func(a *tweaked) {
			a.progress = func(p operations.Progress, err error, _ int) (operations.Progress, error) {
				if errors.Is(err, operations.ErrInvalidOperationID) {
					return operations.Progress{}, nil
				}
				return p, err
			}
		},
		wantFail: []string{"ProgressUnknownID"},
	},
	"forgets finished operations": {
		tweak: func(a *tweaked) {
			a.progress = func(p operations.Progress, err error, n int) (operations.Progress, error) {
				if p.Completed && n > 1 {
					return operations.Progress{}, operations.InvalidOperationID(a.name, "x")
				}
				return p, err
			}
		},
		wantFail: []string{"FinishedStaysCompleted", "CancelFinished"},
	},
	"completion flickers": {
		tweak: func(a *tweaked) {
			a.progress = func(p operations.Progress, err error, n int) (operations.Progress, error) {
				if p.Completed && n == 2 {
					p.NCompleted--
				}
				return p, err
			}
		},
		wantFail: []string{"FinishedStaysCompleted", "CancelFinished"},
	},
	"Cancel fails finished operations": {
		tweak: func(a *tweaked) {
			cancelled := false
			a.cancel = func(ctx context.Context, id string) error { cancelled = true; return nil }
			a.progress = func(p operations.Progress, err error, _ int) (operations.Progress, error) {
				if cancelled {
					p.Err = "cancelled"
				}
				return p, err
			}
		},
		wantFail: []string{"CancelFinished", "CancelRunning"},
	},
	"Cancel errs": {
		tweak: func(a *tweaked) {
			a.cancel = func(ctx context.Context, id string) error { return errors.New("cannot") }
		},
		wantFail: []string{"CancelUnknownID", "CancelFinished", "CancelRunning"},
	},
	"reused IDs": {
		tweak: func(a *tweaked) { a.execute = func(string) string { return "same" } },
		// Progress of the reused ID fails too: the mover does not know it.
		wantFail: []string{"DistinctIDs", "ProgressRunning", "FinishedStaysCompleted", "CancelFinished", "CancelRunning"},
	},
	"operation ID from a plugin without operations": {
		// The mover also reports an unknown ID on Cancel, which a plugin without
		// operations must not.
		noFinish: true,
		wantFail: []string{"NoOperations", "CancelHarmless"},
	},
}

// TestBrokenPluginHelper runs the suite on the broken plugin named by
// ADAPTERTEST_BROKEN; TestSuiteCatchesBrokenPlugins runs it in a child process. Without
// the variable it does nothing.
func TestBrokenPluginHelper(t *testing.T) {
	which := os.Getenv("ADAPTERTEST_BROKEN")
	if which == "" {
		return
	}
	b := broken[which]
	adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[string]{
		New: func(t *testing.T) (adapters.BackupItemAction[string], adaptertest.FinishFunc) {
			clock := clocktest.NewClock(t0)
			m := adaptertest.NewDataMover[string, string]("mover", clock, nil)
			a := &tweaked{BackupItemAction: m.BackupItemAction(), name: m.Name()}
			if b.tweak != nil {
				b.tweak(a)
			}
			if b.noFinish {
				return a, nil
			}
			return a, func(string) { clock.Advance(m.Duration()) }
		},
	})
}

// TestSuitePassesCountsAboveTotal checks that a plugin whose NCompleted exceeds its
// NTotal, as a plugin with an estimated total reports, passes the suite: the Monitor
// records such a report as Velero does.
func TestSuitePassesCountsAboveTotal(t *testing.T) {
	adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[string]{
		New: func(t *testing.T) (adapters.BackupItemAction[string], adaptertest.FinishFunc) {
			clock := clocktest.NewClock(t0)
			m := adaptertest.NewDataMover[string, string]("mover", clock, nil)
			a := &tweaked{BackupItemAction: m.BackupItemAction(), name: m.Name()}
			a.progress = func(p operations.Progress, err error, _ int) (operations.Progress, error) {
				p.NCompleted = p.NTotal + 1
				return p, err
			}
			return a, func(string) { clock.Advance(m.Duration()) }
		},
	})
}

// TestSuiteCatchesBrokenPlugins checks that each rule of the suite fails a plugin that
// breaks it, and only the rules it breaks.
func TestSuiteCatchesBrokenPlugins(t *testing.T) {
	failLine := regexp.MustCompile(`--- FAIL: TestBrokenPluginHelper/(\S+)`)
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenPluginHelper$", "-test.v")
			cmd.Env = append(racebuild.Environ(), "ADAPTERTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a broken plugin (err %v):\n%s", err, out)
			}
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			sort.Strings(failed)
			want := append([]string(nil), b.wantFail...)
			sort.Strings(want)
			if diff := cmp.Diff(want, failed); diff != "" {
				t.Errorf("failed rules (-want +got):\n%s\noutput:\n%s", diff, strings.TrimSpace(string(out)))
			}
			// A failure says which item the plugin was given.
			const item = `operations are started by Execute of ConfigMap "adaptertest/item" (the default item: the harness's Item is nil)`
			if !strings.Contains(string(out), item) {
				t.Errorf("the output does not say %q:\n%s", item, out)
			}
		})
	}
}
