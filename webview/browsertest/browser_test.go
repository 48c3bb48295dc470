package browsertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/webview"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of a run's page, as PNG, to this `file` (docs/images/webview-run.png)")

// guard bounds every wait of the tests: a guard against a hang, not a timing.
const guard = 60 * time.Second

// chromium returns the path of the browser, or skips the test where there is none
// (fails under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on the PATH, and CI=true: install Debian's chromium package")
	}
	t.Skip("no chromium on the PATH (install Debian's chromium package, or set $CHROMIUM)")
	return ""
}

// console collects what a page reports as an error: console.error and
// console.warn calls, uncaught exceptions, and the browser's own error entries (a
// refused script, a violated Content-Security-Policy, a failed load).
type console struct {
	mu   sync.Mutex
	errs []string
}

func (c *console) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.APITypeError && ev.Type != runtime.APITypeWarning {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, string(a.Value)+a.Description)
		}
		msg = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " "))
	case *runtime.EventExceptionThrown:
		msg = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level != cdplog.LevelError && ev.Entry.Level != cdplog.LevelWarning {
			return
		}
		msg = fmt.Sprintf("%s %s: %s (%s)", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
	default:
		return
	}
	c.mu.Lock()
	c.errs = append(c.errs, msg)
	c.mu.Unlock()
}

// take returns the errors collected since the last call, and forgets them.
func (c *console) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := c.errs
	c.errs = nil
	return errs
}

// newBrowser starts headless Chromium with a fresh profile and returns a tab's context
// and the console of that tab. Everything ends with the test.
func newBrowser(t *testing.T) (context.Context, *console) {
	t.Helper()
	path := chromium(t)
	// Not t.TempDir: Chromium's helper processes may still write to the profile for a
	// moment after the browser has exited, which would fail the test at cleanup.
	profile, err := os.MkdirTemp("", "webview-chromium-")
	require.NoError(t, err)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// The chromedp of Go 1.23 knows an older protocol than the browser's: events of
	// the network domain with newer values fail to decode, and are of no use here.
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "could not unmarshal event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	c := &console{}
	chromedp.ListenTarget(ctx, c.listen)
	require.NoError(t, chromedp.Run(ctx), "start chromium")
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("could not remove the browser profile %s", profile)
	})
	return ctx, c
}

// run runs actions on the tab, bounded by guard.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	require.NoError(t, chromedp.Run(ctx, actions...))
}

// eval evaluates a JavaScript expression on the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	var v T
	run(t, ctx, chromedp.Evaluate(expr, &v))
	return v
}

// waitFor waits until the JavaScript expression is true on the page. An evaluation
// that fails because the page is navigating is tried again on the next page.
func waitFor(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(guard)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = chromedp.Run(actx, chromedp.Evaluate("!!("+expr+")", &ok))
		cancel()
		if last == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waited %v for %s (last error: %v)", guard, expr, last)
}

// navigate loads u and waits for the page's body.
func navigate(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(u), chromedp.WaitReady("body", chromedp.ByQuery))
}

// stepper is a plugin whose operations move only when the test says: Progress reports
// the count the test set, and completion once it reaches the total, with the time of
// its first call as when the operation started and the time the count last changed as
// its last update, as a data mover would. Cancel records the operation it was asked to
// stop.
type stepper struct {
	done      atomic.Int64
	total     int64
	cancelled sync.Map // operation ID → true

	mu      sync.Mutex
	started time.Time // when Progress was first called
	last    int64     // the count Progress last reported
	updated time.Time // when that count was first reported
}

func (s *stepper) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	n := s.done.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.started.IsZero() {
		s.started, s.updated = now, now
	}
	if n != s.last {
		s.last, s.updated = n, now
	}
	return operations.Progress{NCompleted: n, NTotal: s.total, OperationUnits: "Bytes", Completed: n >= s.total,
		Started: s.started, Updated: s.updated}, nil
}

func (s *stepper) Cancel(_ context.Context, op operations.Operation) error {
	s.cancelled.Store(op.ID, true)
	return nil
}

type resolver map[string]operations.Tracker

func (r resolver) Resolve(action string) (operations.Tracker, error) {
	if t, ok := r[action]; ok {
		return t, nil
	}
	return nil, errors.New("no plugin " + action)
}

// hostileName is a run name that would read "exe.png" backwards, with mark-up, an
// escape sequence and a zero-width space: the web view must show it as escaped text.
const hostileName = "\u202egnp.exe<script>alert(1)</script><b>bold</b>\x1b[2J\u200b"

// live is a store with a Monitor working on it, and the view mounted under /ops/.
type live struct {
	store   *memstore.Store
	mover   *stepper // the plugin of Backup/moving, with 3 operations
	stuck   *stepper // the plugin of Backup/stuck, whose operation never ends
	base    string   // the view's URL, ending in /ops/
	consent atomic.Bool
}

// startLive starts the store, the Monitor and the server. It stores 60 restores for
// the paging and filters, Backup/moving and Backup/stuck waiting for their operations,
// and a failed Backup whose name is hostileName.
func startLive(t *testing.T) *live {
	t.Helper()
	ctx := context.Background()
	l := &live{store: memstore.New(), mover: &stepper{total: 3}, stuck: &stepper{total: 1 << 40}}
	for i := range 60 {
		o := operations.Owner{Kind: phase.Restore, Name: fmt.Sprintf("restore-%02d", i)}
		_, err := operations.StartRun(ctx, l.store, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{}, nil
		})
		require.NoError(t, err)
	}
	for _, r := range []struct {
		name, action string
		ops          int
	}{{"moving", "example.io/mover", 3}, {"stuck", "example.io/stuck", 1}} {
		o := operations.Owner{Kind: phase.Backup, Name: r.name, UID: "uid-" + r.name}
		_, err := operations.StartRun(ctx, l.store, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
			var mr operations.MainRun
			for i := range r.ops {
				mr.Operations = append(mr.Operations, operations.Operation{
					Action: r.action, ID: fmt.Sprintf("%s-op-%d", r.name, i),
					Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: fmt.Sprintf("pvc-%d", i)},
				})
			}
			return mr, nil
		})
		require.NoError(t, err)
	}
	_, err := operations.StartRun(ctx, l.store, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: hostileName}},
		func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Fatal: true, Reason: "plugin said \u2067<img src=x onerror=alert(2)>\u2069"}, nil
		})
	require.NoError(t, err)

	m := monitor.New(l.store, resolver{"example.io/mover": l.mover, "example.io/stuck": l.stuck},
		monitor.WithInterval(200*time.Millisecond))
	mctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = m.Run(mctx)
	}()
	h, err := webview.New(l.store, webview.WithRefresh(time.Second), webview.WithPageSize(25),
		webview.WithAuthorize(func(*http.Request, webview.Action) error {
			if !l.consent.Load() {
				return errors.New("the hook says no")
			}
			return nil
		}))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops/", h))
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(mux)
	l.base = srv.URL + "/ops/"
	t.Cleanup(func() {
		srv.Close()
		stop()
		<-stopped
	})
	return l
}

func TestPagesInChromium(t *testing.T) {
	ctx, con := newBrowser(t)
	l := startLive(t)
	noErrors := func(t *testing.T, where string) {
		t.Helper()
		require.Empty(t, con.take(), "console errors on %s", where)
	}

	t.Run("runs page, filters and paging", func(t *testing.T) {
		navigate(t, ctx, l.base)
		require.Equal(t, "63 runs · page 1 of 3", eval[string](t, ctx, `document.querySelector(".count").textContent`))
		require.Equal(t, 25, eval[int](t, ctx, `document.querySelectorAll("tbody tr").length`))
		noErrors(t, "the runs page")

		// Filter by kind, phase and name, through the form, as a user would.
		run(t, ctx,
			chromedp.SetValue("#f-kind", "Backup", chromedp.ByQuery),
			chromedp.SetValue("#f-phase", "WaitingForPluginOperations", chromedp.ByQuery),
			chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery))
		waitFor(t, ctx, `location.search.includes("phase=Waiting") && document.readyState === "complete"`)
		names := eval[[]string](t, ctx, `[...document.querySelectorAll("tbody td:nth-child(2) a")].map(a => a.textContent)`)
		require.Equal(t, []string{"moving", "stuck"}, names)
		require.Equal(t, "WaitingForPluginOperations", eval[string](t, ctx, `document.querySelector("#f-phase").value`), "the form keeps the filter")
		run(t, ctx,
			chromedp.SetValue("#f-q", "uck", chromedp.ByQuery),
			chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery))
		waitFor(t, ctx, `location.search.includes("q=uck") && document.readyState === "complete"`)
		names = eval[[]string](t, ctx, `[...document.querySelectorAll("tbody td:nth-child(2) a")].map(a => a.textContent)`)
		require.Equal(t, []string{"stuck"}, names)
		noErrors(t, "the filtered runs page")

		// Page through the restores with the pager's links.
		navigate(t, ctx, l.base+"?kind=Restore&size=25")
		run(t, ctx, chromedp.Click(`a[rel=next]`, chromedp.ByQuery))
		waitFor(t, ctx, `location.search.includes("page=2") && document.readyState === "complete"`)
		require.Equal(t, "restore-25", eval[string](t, ctx, `document.querySelector("tbody td:nth-child(2) a").textContent`))
		run(t, ctx, chromedp.Click(`a[rel=next]`, chromedp.ByQuery))
		waitFor(t, ctx, `location.search.includes("page=3") && document.readyState === "complete"`)
		require.Equal(t, 10, eval[int](t, ctx, `document.querySelectorAll("tbody tr").length`))
		require.False(t, eval[bool](t, ctx, `!!document.querySelector("a[rel=next]")`), "no next page after the last")
		noErrors(t, "the pages of restores")
	})

	t.Run("hostile names render as text", func(t *testing.T) {
		navigate(t, ctx, l.base+"?q="+url.QueryEscape("gnp.exe"))
		link := eval[string](t, ctx, `document.querySelector("tbody td:nth-child(2) a").textContent`)
		require.Equal(t, `\u202egnp.exe<script>alert(1)</script><b>bold</b>\x1b[2J\u200b`, link)
		require.Equal(t, 1, eval[int](t, ctx, `document.scripts.length`), "only the view's own script")
		require.Equal(t, 0, eval[int](t, ctx, `document.querySelectorAll("main b, main img").length`))
		run(t, ctx, chromedp.Click(`tbody td:nth-child(2) a`, chromedp.ByQuery))
		waitFor(t, ctx, `location.pathname.endsWith("/ops/run") && document.readyState === "complete"`)
		require.Contains(t, eval[string](t, ctx, `document.querySelector(".timeline").textContent`),
			`plugin said \u2067<img src=x onerror=alert(2)>\u2069`)
		require.Equal(t, 0, eval[int](t, ctx, `document.querySelectorAll("main b, main img").length`))
		noErrors(t, "the pages of a hostile name")
	})

	t.Run("live update without reload", func(t *testing.T) {
		navigate(t, ctx, l.base+"run?kind=Backup&name=moving")
		waitFor(t, ctx, `document.querySelector("tbody tr td:nth-child(5)").textContent.includes("0/3")`)
		if *screenshot != "" {
			l.mover.done.Store(2)
			waitFor(t, ctx, `document.querySelector("tbody tr td:nth-child(5)").textContent.includes("2/3")`)
			var png []byte
			run(t, ctx, chromedp.FullScreenshot(&png, 100))
			require.NoError(t, os.WriteFile(*screenshot, png, 0o644))
			l.mover.done.Store(0)
			waitFor(t, ctx, `document.querySelector("tbody tr td:nth-child(5)").textContent.includes("0/3")`)
		}
		// A mark that a reload would lose.
		run(t, ctx, chromedp.Evaluate(`window.notReloaded = true`, nil))
		l.mover.done.Store(1)
		waitFor(t, ctx, `document.querySelector("tbody tr td:nth-child(5)").textContent.includes("1/3")`)
		require.True(t, eval[bool](t, ctx, `window.notReloaded === true`), "the page was redrawn, not reloaded")
		require.Equal(t, "1", eval[string](t, ctx, `document.querySelector("tbody progress").getAttribute("value")`))

		// The run ends: the page shows it, and stops asking.
		l.mover.done.Store(3)
		waitFor(t, ctx, `document.querySelector("#live-status").textContent.includes("The run has ended.")`)
		require.True(t, eval[bool](t, ctx, `window.notReloaded === true`))
		require.Equal(t, "Completed", eval[string](t, ctx, `document.querySelector(".facts .phase").textContent`))
		require.False(t, eval[bool](t, ctx, `!!document.querySelector("main[data-live]")`))
		noErrors(t, "the live run page")
	})

	t.Run("cancel needs a valid token and the hook", func(t *testing.T) {
		page := l.base + "run?kind=Backup&name=stuck"
		navigate(t, ctx, page)
		require.True(t, eval[bool](t, ctx, `!!document.querySelector("form.cancel")`))
		noErrors(t, "the page of a stuck run")

		// A token changed in the page: 403.
		run(t, ctx,
			chromedp.Evaluate(`document.querySelector("form.cancel input[name=token]").value = "00".repeat(32)`, nil),
			chromedp.Click(`form.cancel button`, chromedp.ByQuery))
		waitFor(t, ctx, `location.pathname.endsWith("/ops/cancel") && document.readyState === "complete"`)
		require.Equal(t, "403 Forbidden", eval[string](t, ctx, `document.querySelector("h1").textContent`))
		require.Contains(t, eval[string](t, ctx, `document.querySelector(".error").textContent`), "token")
		con.take() // the browser logs the 403 it was answered

		// A valid token, but the hook refuses: 403.
		navigate(t, ctx, page)
		run(t, ctx, chromedp.Click(`form.cancel button`, chromedp.ByQuery))
		waitFor(t, ctx, `location.pathname.endsWith("/ops/cancel") && document.readyState === "complete"`)
		require.Equal(t, "403 Forbidden", eval[string](t, ctx, `document.querySelector("h1").textContent`))
		require.Contains(t, eval[string](t, ctx, `document.querySelector(".error").textContent`), "the hook says no")
		con.take()
		r, err := l.store.GetRun(context.Background(), operations.Owner{Kind: phase.Backup, Name: "stuck"})
		require.NoError(t, err)
		require.False(t, r.CancelRequested(), "a refused cancel changes nothing")

		// Both: the run is cancelled, the page says so, and the Monitor fails it.
		l.consent.Store(true)
		navigate(t, ctx, page)
		run(t, ctx,
			chromedp.SendKeys("#cancel-reason", "from the browser", chromedp.ByQuery),
			chromedp.Click(`form.cancel button`, chromedp.ByQuery))
		waitFor(t, ctx, `location.pathname.endsWith("/ops/run") && document.readyState === "complete"`)
		waitFor(t, ctx, `document.querySelector(".facts").textContent.includes("from the browser")`)
		waitFor(t, ctx, `document.querySelector(".facts .phase").textContent === "Failed"`)
		_, asked := l.stuck.cancelled.Load("stuck-op-0")
		require.True(t, asked, "the Monitor asked the plugin to cancel the operation")
		noErrors(t, "the cancelled run's page")
	})

	t.Run("every control is labelled and reachable by Tab", func(t *testing.T) {
		l.consent.Store(false)
		// A run with a cancel form: a fresh stuck run.
		o := operations.Owner{Kind: phase.Backup, Name: "stuck-2"}
		_, err := operations.StartRun(context.Background(), l.store, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: []operations.Operation{{Action: "example.io/stuck", ID: "s2",
				Resource: operations.ResourceIdentifier{Resource: "pods", Name: "p"}}}}, nil
		})
		require.NoError(t, err)
		for _, page := range []string{l.base + "?size=5", l.base + "run?kind=Backup&name=stuck-2", l.base + "op?kind=Backup&name=stuck-2&id=s2"} {
			navigate(t, ctx, page)
			// Number every control; each needs a name a screen reader reads.
			unnamed := eval[[]string](t, ctx, `(() => {
				const bad = [];
				document.querySelectorAll("a[href], button, input:not([type=hidden]), select").forEach((el, i) => {
					el.dataset.k = i;
					const label = el.getAttribute("aria-label") || (el.labels && [...el.labels].map(l => l.textContent).join(" ")) || el.textContent;
					if (!label || !label.trim()) bad.push(el.outerHTML);
				});
				return bad;
			})()`)
			require.Empty(t, unnamed, "controls without a name on %s", page)
			n := eval[int](t, ctx, `document.querySelectorAll("[data-k]").length`)
			require.Greater(t, n, 1)
			reached := map[string]bool{}
			for range n + 3 {
				run(t, ctx, chromedp.KeyEvent(kb.Tab))
				if k := eval[string](t, ctx, `document.activeElement && document.activeElement.dataset.k || ""`); k != "" {
					reached[k] = true
				}
			}
			require.Len(t, reached, n, "controls reached by Tab on %s", page)
			noErrors(t, page)
		}
	})
}
