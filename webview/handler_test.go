package webview_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/visible"
	"github.com/itemops/itemops/webview"
)

var update = flag.Bool("update", false, "rewrite the golden pages in testdata")

// get serves a GET of target (relative to the mount point) and returns the response.
func get(t *testing.T, h http.Handler, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/"+target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func newHandler(t *testing.T, s operations.Store, opts ...webview.Option) *webview.Handler {
	t.Helper()
	h, err := webview.New(s, opts...)
	require.NoError(t, err)
	return h
}

// token is what a cancel form holds; tokens differ from Handler to Handler, so the
// goldens show a placeholder.
var token = regexp.MustCompile(`name="token" value="[0-9a-f]{64}"`)

// TestGolden renders each page of the fixture and compares it with testdata/NAME.html;
// go test ./webview -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	s, clk := fixture(t)
	allow := func(*http.Request, webview.Action) error { return nil }
	for _, tc := range []struct {
		name, target string
		opts         []webview.Option
		status       int
	}{
		{"runs", "", nil, 200},
		{"runs-filtered", "?kind=backup&phase=WaitingForPluginOperations&q=night", nil, 200},
		{"run", "run?kind=Backup&name=nightly", nil, 200},
		{"run-cancel", "run?kind=Backup&name=nightly", []webview.Option{webview.WithAuthorize(allow)}, 200},
		{"run-hostile", "run?kind=Backup&name=" + url.QueryEscape(bidiName), nil, 200},
		{"op", "op?kind=Backup&name=nightly&id=snap-1", nil, 200},
		{"not-found", "run?kind=Restore&name=nightly", nil, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(t, s, append([]webview.Option{webview.WithClock(clk)}, tc.opts...)...)
			res := get(t, h, tc.target)
			require.Equal(t, tc.status, res.StatusCode)
			got := token.ReplaceAllString(body(t, res), `name="token" value="TOKEN"`)
			path := filepath.Join("testdata", tc.name+".html")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to write the golden page")
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s: page differs from %s (-want +got):\n%s", tc.target, path, diff)
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	s := memstore.New()
	for _, tc := range []struct {
		name string
		opt  webview.Option
	}{
		{"nil hook", webview.WithAuthorize(nil)},
		{"nil clock", webview.WithClock(nil)},
		{"page size 0", webview.WithPageSize(0)},
		{"page size 501", webview.WithPageSize(501)},
		{"refresh under a second", webview.WithRefresh(time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webview.New(s, tc.opt)
			require.ErrorIs(t, err, webview.ErrInvalidOption)
		})
	}
	_, err := webview.New(nil)
	require.ErrorIs(t, err, webview.ErrInvalidOption)
	_, err = webview.New(s, webview.WithPageSize(500), webview.WithRefresh(time.Second))
	require.NoError(t, err)
}

// manyRuns stores n backups and n restores, every third backup completed.
func manyRuns(t *testing.T, n int) *memstore.Store {
	t.Helper()
	s := memstore.New()
	for i := range n {
		b := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%03d", i)}
		if i%3 == 0 {
			createRun(t, s, b, phase.InProgress, "", t0, phase.Completed, "", t0)
		} else {
			createRun(t, s, b)
		}
		createRun(t, s, operations.Owner{Kind: phase.Restore, Name: fmt.Sprintf("restore-%03d", i)})
	}
	return s
}

// runsOf returns the JSON form of a runs page.
func runsOf(t *testing.T, h http.Handler, query string) (names []string, total, pages int) {
	t.Helper()
	res := get(t, h, "?format=json&"+query)
	require.Equal(t, 200, res.StatusCode, query)
	var j struct {
		Runs []struct {
			Kind, Name, Phase string
		}
		Total, Pages int
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&j))
	for _, r := range j.Runs {
		names = append(names, r.Kind+"/"+r.Name)
	}
	return names, j.Total, j.Pages
}

func TestRunsFiltersAndPages(t *testing.T) {
	s := manyRuns(t, 120)
	var calls []string
	var mu sync.Mutex
	counted := decorate.Store(s, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		mu.Lock()
		calls = append(calls, c.Method)
		mu.Unlock()
		return call(ctx)
	})
	h := newHandler(t, counted, webview.WithPageSize(25))

	names, total, pages := runsOf(t, h, "")
	require.Equal(t, 240, total)
	require.Equal(t, 10, pages)
	require.Len(t, names, 25)
	require.Equal(t, "Backup/backup-000", names[0])
	require.Equal(t, []string{"ListRuns"}, calls, "one store call for a page of runs, none per run")

	names, total, _ = runsOf(t, h, "kind=restore&page=5")
	require.Equal(t, 120, total)
	require.Equal(t, []string{"Restore/restore-100", "Restore/restore-119"}, []string{names[0], names[len(names)-1]})

	names, total, _ = runsOf(t, h, "kind=Backup&phase=Completed&size=1000")
	require.Equal(t, 40, total)
	require.Len(t, names, 40)
	require.Equal(t, "Backup/backup-117", names[39])

	names, total, _ = runsOf(t, h, "q=-11")
	require.Equal(t, 20, total, "backup-110..119 and restore-110..119")
	require.Equal(t, "Backup/backup-110", names[0])

	names, total, pages = runsOf(t, h, "q=nothing-has-this")
	require.Zero(t, total)
	require.Empty(t, names)
	require.Equal(t, 1, pages)

	_, total, _ = runsOf(t, h, "phase=New&phase=Completed")
	require.Equal(t, 240, total)

	for _, bad := range []string{"page=0", "page=x", "size=-1", "phase=Done", "kind=no%20such"} {
		require.Equal(t, http.StatusBadRequest, get(t, h, "?"+bad).StatusCode, bad)
	}

	// The HTML pages link each to the next, keeping the filter.
	page := body(t, get(t, h, "?kind=Restore&size=50&page=2"))
	require.Contains(t, page, `href="./?kind=Restore&amp;page=1&amp;size=50" rel="prev"`)
	require.Contains(t, page, `href="./?kind=Restore&amp;page=3&amp;size=50" rel="next"`)
	last := body(t, get(t, h, "?kind=Restore&size=50&page=3"))
	require.NotContains(t, last, `rel="next"`)
	require.Contains(t, last, "120 runs · page 3 of 3")
}

func TestRunPageJSON(t *testing.T) {
	s, clk := fixture(t)
	h := newHandler(t, s, webview.WithClock(clk), webview.WithPageSize(2))
	res := get(t, h, "run?kind=Backup&name=nightly&format=json")
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
	var j struct {
		Run struct {
			Kind, Name, UID, Phase string
			Terminal               bool
			History                []struct{ From, To, Event, Reason string }
		}
		Live       bool
		Operations []struct {
			ID, Action, Phase, Error string
			NCompleted, NTotal       int64
			Attempts                 int
			NextPoll                 time.Time
			LastError                string
		}
		Total, Pages int
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&j))
	require.Equal(t, "WaitingForPluginOperations", j.Run.Phase)
	require.True(t, j.Live)
	require.Len(t, j.Run.History, 2)
	require.Equal(t, 3, j.Total)
	require.Equal(t, 2, j.Pages)
	require.Len(t, j.Operations, 2)
	require.Equal(t, "snap-1", j.Operations[0].ID)
	require.Equal(t, int64(40), j.Operations[0].NCompleted)
	require.Equal(t, 2, j.Operations[0].Attempts)
	require.True(t, j.Operations[0].NextPoll.Equal(t0.Add(10*time.Minute+30*time.Second)))
	require.Equal(t, "volume snapshot class not found", j.Operations[1].Error)

	// Texts are stored values in JSON, not escapes.
	names, _, _ := runsOf(t, h, "kind=Backup&q="+url.QueryEscape(bidiName))
	require.Equal(t, []string{"Backup/" + bidiName}, names)

	res = get(t, h, "op?kind=Backup&name=nightly&id=snap-1&format=json")
	require.Equal(t, 200, res.StatusCode)
	var op struct {
		Live      bool
		Operation struct {
			ID                 string
			PostOperationItems []struct{ Resource, Name string }
		}
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&op))
	require.True(t, op.Live)
	require.Equal(t, "volumesnapshots", op.Operation.PostOperationItems[0].Resource)

	res = get(t, h, "op?kind=Backup&name=nightly&id=nope&format=json")
	require.Equal(t, 404, res.StatusCode)
	require.Contains(t, body(t, res), `"error"`)
}

// TestETag checks the live refresh's protocol: the page hands its script the ETag of its
// JSON form, a poll with it is answered 304 while nothing changes, even as the clock
// moves, and 200 with a new tag once the store changes.
func TestETag(t *testing.T) {
	s, clk := fixture(t)
	h := newHandler(t, s, webview.WithClock(clk))
	const page = "run?kind=Backup&name=nightly"
	html := body(t, get(t, h, page))
	m := regexp.MustCompile(`data-etag="([^"]+)"`).FindStringSubmatch(html)
	require.NotNil(t, m, "a live page carries its JSON form's ETag")
	tag := strings.ReplaceAll(m[1], "&#34;", `"`)
	first := get(t, h, page+"&format=json")
	require.Equal(t, tag, first.Header.Get("ETag"))

	clk.Advance(time.Minute)
	res := get(t, h, page+"&format=json", "If-None-Match", tag)
	require.Equal(t, http.StatusNotModified, res.StatusCode)
	require.Empty(t, body(t, res))

	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	op, err := s.GetOperation(context.Background(), o, "snap-1")
	require.NoError(t, err)
	op.Status.NCompleted = 60
	require.NoError(t, s.PutOperations(context.Background(), o, []operations.Operation{op}))
	res = get(t, h, page+"&format=json", "If-None-Match", tag)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotEqual(t, tag, res.Header.Get("ETag"))
	require.Contains(t, body(t, res), `"nCompleted": 60`)

	// A run that has ended is not live: its page has no data-live for the script.
	done := body(t, get(t, h, "run?kind=Restore&name=restore-1"))
	require.NotContains(t, done, "data-live")
	require.Contains(t, done, "The run has ended.")
}

// TestHostileText renders every page of the hostile runs and checks that no rune that
// shows as nothing or reorders text reaches the page, and that no stored mark-up
// becomes an element.
func TestHostileText(t *testing.T) {
	s, clk := fixture(t)
	ops := hostileOperations(t)
	h := newHandler(t, s, webview.WithClock(clk), webview.WithAuthorize(func(*http.Request, webview.Action) error { return nil }))
	corpus := ops[0].Owner.Name
	for _, target := range []string{
		"",
		"?q=" + url.QueryEscape(bidiName),
		"?q=" + url.QueryEscape(corpus),
		"run?kind=Backup&name=" + url.QueryEscape(bidiName),
		"run?kind=Backup&name=" + url.QueryEscape(corpus),
		"op?kind=Backup&name=" + url.QueryEscape(corpus) + "&id=" + url.QueryEscape(ops[0].ID),
		"run?kind=Backup&name=" + url.QueryEscape(bidiName+"-missing"),
	} {
		page := body(t, get(t, h, target))
		if i := strings.IndexFunc(page, func(r rune) bool { return visible.Unsafe(r) && r != '\n' }); i >= 0 {
			t.Errorf("%s: unsafe rune %q at byte %d: %q", target, page[i:i+4], i, page[max(0, i-200):i+20])
		}
		require.NotContains(t, page, "<script>alert", target)
		require.NotContains(t, page, "<b>nothing", target)
	}
	page := body(t, get(t, h, "run?kind=Backup&name="+url.QueryEscape(bidiName)))
	require.Contains(t, page, `\u202egnp.exe&lt;script&gt;alert(1)&lt;/script&gt;\u200b`)
	require.Contains(t, page, `plugin said \x1b[31m\u2067&lt;b&gt;nothing&lt;/b&gt;\u2069`)
	page = body(t, get(t, h, "run?kind=Backup&name="+url.QueryEscape(corpus)))
	require.Contains(t, page, `b\x1b[2J\x00`)
}

// TestCancel checks each refusal of a cancel, then one that is made.
func TestCancel(t *testing.T) {
	s, clk := fixture(t)
	o := operations.Owner{Kind: phase.Backup, Name: "nightly", UID: "uid-1"}
	var asked []webview.Action
	var refuse error
	hook := func(r *http.Request, a webview.Action) error {
		asked = append(asked, a)
		return refuse
	}
	readOnly := newHandler(t, s, webview.WithClock(clk))
	h := newHandler(t, s, webview.WithClock(clk), webview.WithAuthorize(hook))
	require.NotContains(t, body(t, get(t, readOnly, "run?kind=Backup&name=nightly")), `action="cancel"`)
	page := body(t, get(t, h, "run?kind=Backup&name=nightly"))
	m := regexp.MustCompile(`name="token" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the page of a moving run shows a cancel form when a hook is set")
	tok := m[1]
	post := func(h http.Handler, form url.Values) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/cancel", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	form := func(name, token string) url.Values {
		return url.Values{"run": {runField("Backup", name, "uid-1")}, "token": {token}, "reason": {"ops asked"}}
	}
	require.Equal(t, http.StatusMethodNotAllowed, get(t, h, "cancel?"+form("nightly", tok).Encode()).StatusCode)
	require.Equal(t, http.StatusForbidden, post(readOnly, form("nightly", tok)).StatusCode, "read-only")
	require.Equal(t, http.StatusForbidden, post(h, form("nightly", "")).StatusCode, "no token")
	require.Equal(t, http.StatusForbidden, post(h, form("nightly", strings.Repeat("0", 64))).StatusCode, "bad token")
	other := newHandler(t, s, webview.WithClock(clk), webview.WithAuthorize(hook))
	require.Equal(t, http.StatusForbidden, post(other, form("nightly", tok)).StatusCode, "another Handler's token")
	bad := form("nightly", tok)
	bad.Set("run", runField("Backup", "nightly", "uid-2"))
	require.Equal(t, http.StatusForbidden, post(h, bad).StatusCode, "a token names the run's UID")
	require.Empty(t, asked, "the hook is asked only with a valid token")

	refuse = errors.New("not on call")
	res := post(h, form("nightly", tok))
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Contains(t, body(t, res), "not on call")
	require.Equal(t, []webview.Action{{Verb: webview.VerbCancel, Run: o}}, asked)
	r, err := s.GetRun(context.Background(), o)
	require.NoError(t, err)
	require.False(t, r.CancelRequested(), "refusals change nothing")

	refuse = nil
	res = post(h, form("nightly", tok))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "run?kind=Backup&name=nightly", res.Header.Get("Location"))
	r, err = s.GetRun(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, "ops asked", r.Cancel.Reason)
	require.True(t, r.Cancel.At.Equal(clk.Now()))
	require.NotContains(t, body(t, get(t, h, "run?kind=Backup&name=nightly")), `action="cancel"`, "no form once requested")

	// Another run's token is a bad token.
	require.Equal(t, http.StatusForbidden, post(h, url.Values{"run": {runField("Restore", "restore-1", "")}, "token": {tok}}).StatusCode)

	// The hostile corpus's run, whose name holds ESC and NUL, is cancelled by its own
	// form: the name comes back whole.
	corpus := hostileOperations(t)[0].Owner
	page = body(t, get(t, h, "run?kind=Backup&name="+url.QueryEscape(corpus.Name)))
	fields := map[string]string{}
	for _, m := range regexp.MustCompile(`name="(run|token)" value="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		fields[m[1]] = strings.ReplaceAll(m[2], "&amp;", "&")
	}
	res = post(h, url.Values{"run": {fields["run"]}, "token": {fields["token"]}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode, body(t, res))
	r, err = s.GetRun(context.Background(), operations.Owner{Kind: corpus.Kind, Name: corpus.Name})
	require.NoError(t, err)
	require.Equal(t, "cancelled from the web view", r.Cancel.Reason)
}

// runField is the run field of a cancel form.
func runField(kind, name, uid string) string {
	return url.Values{"kind": {kind}, "name": {name}, "uid": {uid}}.Encode()
}

// TestUnderPrefix mounts the view under /ops/ behind http.StripPrefix and follows every
// link of every page it reaches from the runs page: each must stay under /ops/ and load.
func TestUnderPrefix(t *testing.T) {
	s, clk := fixture(t)
	h := newHandler(t, s, webview.WithClock(clk))
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops/", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	href := regexp.MustCompile(`(?:href|src)="([^"]*)"`)
	start, err := url.Parse(srv.URL + "/ops/")
	require.NoError(t, err)
	seen := map[string]bool{}
	todo := []*url.URL{start}
	for len(todo) > 0 && len(seen) < 60 {
		u := todo[0]
		todo = todo[1:]
		if seen[u.String()] {
			continue
		}
		seen[u.String()] = true
		res, err := srv.Client().Get(u.String())
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode, u.String())
		require.True(t, strings.HasPrefix(u.Path, "/ops/"), u.String())
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			continue
		}
		for _, m := range href.FindAllStringSubmatch(string(b), -1) {
			ref, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
			require.NoError(t, err)
			todo = append(todo, u.ResolveReference(ref))
		}
	}
	require.Greater(t, len(seen), 8, "the crawl reached the run and operation pages")

	// The mount point without its slash is sent to the one with it.
	mux2 := http.NewServeMux()
	mux2.Handle("/ops", http.StripPrefix("/ops", h))
	mux2.Handle("/ops/", http.StripPrefix("/ops", h))
	req := httptest.NewRequest(http.MethodGet, "/ops?kind=Backup", nil)
	w := httptest.NewRecorder()
	mux2.ServeHTTP(w, req)
	require.Equal(t, http.StatusMovedPermanently, w.Code)
	require.Equal(t, "ops/?kind=Backup", w.Header().Get("Location"))
}

func TestMethodsAndAssets(t *testing.T) {
	h := newHandler(t, memstore.New())
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))

	res := get(t, h, "static/view.js")
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, body(t, res), "If-None-Match")
	res = get(t, h, "static/view.css")
	require.Equal(t, "text/css; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, 404, get(t, h, "static/nope.js").StatusCode)
	require.Equal(t, 404, get(t, h, "nope").StatusCode)
	res = get(t, h, "")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, body(t, res), "0 runs")
}
