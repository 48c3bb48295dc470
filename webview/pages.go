package webview

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/visible"
)

// vis returns a stored text as a page shows it: every rune that would show as nothing
// or reorder the text around it becomes a visible escape. html/template escapes the
// result.
func vis(s string) string { return visible.String(s) }

// parsePages parses the embedded templates: each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range []string{"runs", "run", "op", "error"} {
		t, err := template.New(name).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("webview: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// kindOf returns the kind a query names: Backup and Restore in any case, any other name
// as it is (a kind of one's own, which the store checks).
func kindOf(s string) phase.Kind {
	if k, err := phase.ParseKind(s); err == nil {
		return k
	}
	return phase.Kind(s)
}

// runHref is the relative link to the page of the run of o.
func runHref(o operations.Owner) string {
	return "run?" + url.Values{"kind": {string(o.Kind)}, "name": {o.Name}}.Encode()
}

// opHref is the relative link to the page of the operation id of o.
func opHref(o operations.Owner, id string) string {
	return "op?" + url.Values{"kind": {string(o.Kind)}, "name": {o.Name}, "id": {id}}.Encode()
}

// paging is the part of a page's query that selects a page of a list.
type paging struct {
	Page, Size int
}

// pagingOf reads page and size from q; a size above maxPageSize counts as maxPageSize.
func (h *Handler) pagingOf(q url.Values) (paging, error) {
	p := paging{Page: 1, Size: h.pageSize}
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, fmt.Errorf("page %q: want a number from 1", s)
		}
		p.Page = n
	}
	if s := q.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, fmt.Errorf("size %q: want a number from 1", s)
		}
		p.Size = min(n, maxPageSize)
	}
	return p, nil
}

// bounds returns the slice [lo, hi) of n items that p shows, and the number of pages.
func (p paging) bounds(n int) (lo, hi, pages int) {
	pages = max(1, (n+p.Size-1)/p.Size)
	lo = min(n, (p.Page-1)*p.Size)
	hi = min(n, lo+p.Size)
	return lo, hi, pages
}

// pageLinks are the links between the pages of a list.
type pageLinks struct {
	Page, Pages, Total, Size int
	Prev, Next               string // empty on the first and last page
}

// linksOf returns the links of the page p of n items, with the other parameters of q.
func linksOf(base string, q url.Values, p paging, n, pages int) pageLinks {
	l := pageLinks{Page: p.Page, Pages: pages, Total: n, Size: p.Size}
	at := func(page int) string {
		v := url.Values{}
		for k, vs := range q {
			if k != "page" && k != "format" {
				v[k] = vs
			}
		}
		v.Set("page", strconv.Itoa(page))
		return base + "?" + v.Encode()
	}
	if p.Page > 1 {
		l.Prev = at(min(p.Page-1, pages))
	}
	if p.Page < pages {
		l.Next = at(p.Page + 1)
	}
	return l
}

// The JSON forms of the records. They hold the stored values, texts unescaped, and no
// value that depends on the time of the request.
type (
	runJSON struct {
		Kind             string           `json:"kind"`
		Name             string           `json:"name"`
		UID              string           `json:"uid,omitempty"`
		Phase            string           `json:"phase"`
		Terminal         bool             `json:"terminal"`
		Profile          phase.Profile    `json:"profile"`
		OperationTimeout string           `json:"operationTimeout,omitempty"`
		ItemsTotal       int              `json:"itemsTotal"`
		ItemsDone        int              `json:"itemsDone"`
		Errors           int              `json:"errors"`
		Warnings         int              `json:"warnings"`
		FailedOperations int              `json:"failedOperations"`
		FailureReason    string           `json:"failureReason,omitempty"`
		Created          *time.Time       `json:"created,omitempty"`
		Started          *time.Time       `json:"started,omitempty"`
		Completed        *time.Time       `json:"completed,omitempty"`
		Updated          *time.Time       `json:"updated,omitempty"`
		CancelReason     string           `json:"cancelReason,omitempty"`
		CancelAt         *time.Time       `json:"cancelAt,omitempty"`
		History          []transitionJSON `json:"history,omitempty"`
		Href             string           `json:"href"`
	}
	transitionJSON struct {
		From   string     `json:"from"`
		To     string     `json:"to"`
		Event  string     `json:"event"`
		Time   *time.Time `json:"time,omitempty"`
		Reason string     `json:"reason,omitempty"`
	}
	resourceJSON struct {
		Group     string `json:"group,omitempty"`
		Resource  string `json:"resource"`
		Namespace string `json:"namespace,omitempty"`
		Name      string `json:"name"`
	}
	operationJSON struct {
		ID                 string         `json:"id"`
		Action             string         `json:"action"`
		Resource           resourceJSON   `json:"resource"`
		Phase              string         `json:"phase"`
		Error              string         `json:"error,omitempty"`
		NCompleted         int64          `json:"nCompleted"`
		NTotal             int64          `json:"nTotal"`
		OperationUnits     string         `json:"operationUnits,omitempty"`
		Description        string         `json:"description,omitempty"`
		Created            *time.Time     `json:"created,omitempty"`
		Started            *time.Time     `json:"started,omitempty"`
		Updated            *time.Time     `json:"updated,omitempty"`
		ProgressAt         *time.Time     `json:"progressAt,omitempty"`
		NextPoll           *time.Time     `json:"nextPoll,omitempty"`
		Attempts           int            `json:"attempts"`
		ErrorSince         *time.Time     `json:"errorSince,omitempty"`
		LastError          string         `json:"lastError,omitempty"`
		PostOperationItems []resourceJSON `json:"postOperationItems,omitempty"`
		Href               string         `json:"href"`
	}
	runsJSON struct {
		Runs     []runJSON `json:"runs"`
		Total    int       `json:"total"`
		Page     int       `json:"page"`
		Pages    int       `json:"pages"`
		PageSize int       `json:"pageSize"`
	}
	runPageJSON struct {
		Run        runJSON         `json:"run"`
		Live       bool            `json:"live"`
		Operations []operationJSON `json:"operations"`
		Total      int             `json:"total"`
		Page       int             `json:"page"`
		Pages      int             `json:"pages"`
		PageSize   int             `json:"pageSize"`
	}
	opPageJSON struct {
		Run       runJSON       `json:"run"`
		Live      bool          `json:"live"`
		Operation operationJSON `json:"operation"`
	}
)

// timeOf returns t in UTC, or nil for the zero time.
func timeOf(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func runOf(r operations.Run, history bool) runJSON {
	j := runJSON{
		Kind: string(r.Owner.Kind), Name: r.Owner.Name, UID: r.Owner.UID, Phase: string(r.Phase),
		Terminal: phase.IsTerminal(r.Phase), Profile: r.Profile,
		ItemsTotal: r.ItemsTotal, ItemsDone: r.ItemsDone, Errors: r.Errors, Warnings: r.Warnings,
		FailedOperations: r.FailedOperations, FailureReason: r.FailureReason,
		Created: timeOf(r.Created), Started: timeOf(r.Started), Completed: timeOf(r.Completed), Updated: timeOf(r.Updated),
		CancelReason: r.Cancel.Reason, CancelAt: timeOf(r.Cancel.At), Href: runHref(r.Owner),
	}
	if r.OperationTimeout != 0 {
		j.OperationTimeout = r.OperationTimeout.String()
	}
	if history {
		j.History = make([]transitionJSON, len(r.History))
		for i, t := range r.History {
			j.History[i] = transitionJSON{From: string(t.From), To: string(t.To), Event: string(t.Event), Time: timeOf(t.Time), Reason: t.Reason}
		}
	}
	return j
}

func resourceOf(r operations.ResourceIdentifier) resourceJSON {
	return resourceJSON{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

func operationOf(op operations.Operation, items bool) operationJSON {
	s, m := op.Status, op.Monitor
	j := operationJSON{
		ID: op.ID, Action: op.Action, Resource: resourceOf(op.Resource), Phase: string(s.Phase), Error: s.Error,
		NCompleted: s.NCompleted, NTotal: s.NTotal, OperationUnits: s.OperationUnits, Description: s.Description,
		Created: timeOf(s.Created), Started: timeOf(s.Started), Updated: timeOf(s.Updated),
		ProgressAt: timeOf(m.ProgressAt), NextPoll: timeOf(m.NextPoll), Attempts: m.Attempts,
		ErrorSince: timeOf(m.ErrorSince), LastError: m.LastError, Href: opHref(op.Owner, op.ID),
	}
	if items {
		for _, it := range op.PostOperationItems {
			j.PostOperationItems = append(j.PostOperationItems, resourceOf(it))
		}
	}
	return j
}

// The HTML forms of the records: every text made visible (vis) and every time and
// duration written out, against the Handler's clock.
type (
	runView struct {
		Kind, Name, UID, Phase, Href         string
		Terminal                             bool
		ItemsDone, ItemsTotal                int
		Errors, Warnings, FailedOperations   int
		FailureReason, CancelReason, Timeout string
		Created, Started, Completed, Updated string
		CancelAt                             string
		History                              []transitionView
	}
	transitionView struct {
		From, To, Event, Time, Reason string
		Same                          bool // the entry changes no phase (a cancel request)
	}
	operationView struct {
		ID, Action, Resource, Phase, Error, Href string
		NCompleted, NTotal                       int64
		Units, Description                       string
		Bar                                      bool  // NTotal > 0: a bar can show the share
		BarValue                                 int64 // NCompleted, at most NTotal
		Created, Started, Updated                string
		StalledFor, NextPoll                     string
		Attempts                                 int
		ErrorSince, LastError                    string
		ProgressAt                               string
		Items                                    []string
	}
)

// when writes t as a page shows it, or "—" for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func (h *Handler) runView(r operations.Run) runView {
	v := runView{
		Kind: vis(string(r.Owner.Kind)), Name: vis(r.Owner.Name), UID: vis(r.Owner.UID), Phase: vis(string(r.Phase)),
		Href: runHref(r.Owner), Terminal: phase.IsTerminal(r.Phase),
		ItemsDone: r.ItemsDone, ItemsTotal: r.ItemsTotal, Errors: r.Errors, Warnings: r.Warnings,
		FailedOperations: r.FailedOperations, FailureReason: vis(r.FailureReason), CancelReason: vis(r.Cancel.Reason),
		Created: when(r.Created), Started: when(r.Started), Completed: when(r.Completed), Updated: when(r.Updated),
		CancelAt: when(r.Cancel.At), Timeout: "the Monitor's default",
	}
	if r.OperationTimeout != 0 {
		v.Timeout = r.OperationTimeout.String()
	}
	for _, t := range r.History {
		v.History = append(v.History, transitionView{
			From: vis(string(t.From)), To: vis(string(t.To)), Event: vis(string(t.Event)), Time: when(t.Time),
			Reason: vis(t.Reason), Same: t.From == t.To,
		})
	}
	return v
}

func (h *Handler) operationView(op operations.Operation, now time.Time) operationView {
	s, m := op.Status, op.Monitor
	v := operationView{
		ID: vis(op.ID), Action: vis(op.Action), Resource: vis(op.Resource.String()), Phase: vis(string(s.Phase)),
		Error: vis(cmp.Or(s.Error, m.LastError)), Href: opHref(op.Owner, op.ID),
		NCompleted: s.NCompleted, NTotal: s.NTotal, Units: vis(s.OperationUnits), Description: vis(s.Description),
		Bar: s.NTotal > 0, BarValue: min(s.NCompleted, s.NTotal),
		Created: when(s.Created), Started: when(s.Started), Updated: when(s.Updated),
		StalledFor: "—", NextPoll: "—", Attempts: m.Attempts,
		ErrorSince: when(m.ErrorSince), LastError: vis(m.LastError), ProgressAt: when(m.ProgressAt),
	}
	if !s.Phase.Finished() {
		if since := cmp.Or(m.ProgressAt, s.Updated); !since.IsZero() {
			v.StalledFor = span(now.Sub(since))
		}
		switch {
		case m.NextPoll.IsZero():
			v.NextPoll = "next pass"
		case m.NextPoll.After(now):
			v.NextPoll = "in " + span(m.NextPoll.Sub(now))
		default:
			v.NextPoll = "due"
		}
	}
	for _, it := range op.PostOperationItems {
		v.Items = append(v.Items, vis(it.String()))
	}
	return v
}

// span writes a duration rounded to the second; a negative one (a clock behind the
// store's times) counts as zero.
func span(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// filterView is the filter form of the runs page, as the query set it.
type filterView struct {
	Kind, Query string
	Phases      []phaseOption
	Size        int
}

type phaseOption struct {
	Name     string
	Selected bool
}

type runsPage struct {
	Title  string
	Filter filterView
	Runs   []runView
	Links  pageLinks
	JSON   string
}

// serveRuns serves the runs list. It lists the runs once, with the kind and phases of
// the query, keeps those whose name holds the query's text, in the store's order, and
// shows one page of them: no store call per run.
func (h *Handler) serveRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := h.pagingOf(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	var f operations.RunFilter
	if s := q.Get("kind"); s != "" {
		f.Kind = kindOf(s)
		if err := f.Kind.Validate(); err != nil {
			h.fail(w, r, http.StatusBadRequest, fmt.Errorf("kind %q: %w", s, err))
			return
		}
	}
	for _, s := range q["phase"] {
		if s == "" {
			continue
		}
		ph, err := phase.Parse(s)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, err)
			return
		}
		f.Phases = append(f.Phases, ph)
	}
	runs, err := h.store.ListRuns(r.Context(), f)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	if name := q.Get("q"); name != "" {
		runs = slices.DeleteFunc(runs, func(r operations.Run) bool { return !strings.Contains(r.Owner.Name, name) })
	}
	lo, hi, pages := p.bounds(len(runs))
	shown := runs[lo:hi]
	if wantJSON(r) {
		j := runsJSON{Runs: make([]runJSON, len(shown)), Total: len(runs), Page: p.Page, Pages: pages, PageSize: p.Size}
		for i, run := range shown {
			j.Runs[i] = runOf(run, false)
		}
		serveJSON(w, r, j)
		return
	}
	page := runsPage{
		Title:  "Runs",
		Filter: filterView{Kind: vis(q.Get("kind")), Query: vis(q.Get("q")), Size: p.Size},
		Runs:   make([]runView, len(shown)),
		Links:  linksOf("./", q, p, len(runs), pages),
		JSON:   "./?" + withJSON(q),
	}
	for _, ph := range phase.Phases() {
		page.Filter.Phases = append(page.Filter.Phases, phaseOption{Name: string(ph), Selected: slices.Contains(f.Phases, ph)})
	}
	for i, run := range shown {
		page.Runs[i] = h.runView(run)
	}
	h.serveHTML(w, r, http.StatusOK, "runs", page)
}

// withJSON returns q with format=json, encoded.
func withJSON(q url.Values) string {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Set("format", "json")
	return v.Encode()
}

// ownerOf reads the run a query names.
func ownerOf(q url.Values) (operations.Owner, error) {
	o := operations.Owner{Kind: kindOf(q.Get("kind")), Name: q.Get("name")}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

type runPage struct {
	Title      string
	Live       bool
	ETag       string
	RefreshMS  int64
	Every      string // the refresh interval, written out
	Run        runView
	Operations []operationView
	Links      pageLinks
	JSON       string
	List       string
	Cancel     *cancelForm
}

// cancelForm is what the cancel form of a run page posts: the run's kind, name and UID,
// query-encoded, and the token of the run.
type cancelForm struct {
	Run, Token string
}

// serveRun serves the page of a run: a GetRun and a ListOperations call.
func (h *Handler) serveRun(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o, err := ownerOf(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	p, err := h.pagingOf(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	run, err := h.store.GetRun(r.Context(), o)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	ops, err := h.store.ListOperations(r.Context(), o, operations.OperationFilter{})
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	lo, hi, pages := p.bounds(len(ops))
	shown := ops[lo:hi]
	j := runPageJSON{
		Run: runOf(run, true), Live: !phase.IsTerminal(run.Phase), Operations: make([]operationJSON, len(shown)),
		Total: len(ops), Page: p.Page, Pages: pages, PageSize: p.Size,
	}
	for i, op := range shown {
		j.Operations[i] = operationOf(op, false)
	}
	if wantJSON(r) {
		serveJSON(w, r, j)
		return
	}
	now := h.clock.Now()
	page := runPage{
		Title: "Run " + vis(string(o.Kind)) + "/" + vis(o.Name), Live: j.Live, ETag: jsonTag(j),
		RefreshMS: h.refresh.Milliseconds(), Every: h.refresh.String(), Run: h.runView(run), Operations: make([]operationView, len(shown)),
		Links: linksOf("run", q, p, len(ops), pages), JSON: "run?" + withJSON(q), List: "./",
	}
	for i, op := range shown {
		page.Operations[i] = h.operationView(op, now)
	}
	if h.authorize != nil && j.Live && !run.CancelRequested() && run.Phase != phase.Deleting {
		page.Cancel = &cancelForm{
			Run:   url.Values{"kind": {string(run.Owner.Kind)}, "name": {run.Owner.Name}, "uid": {run.Owner.UID}}.Encode(),
			Token: hex.EncodeToString(h.tokenOf(run.Owner)),
		}
	}
	h.serveHTML(w, r, http.StatusOK, "run", page)
}

type opPage struct {
	Title     string
	Live      bool
	ETag      string
	RefreshMS int64
	Every     string
	Run       runView
	Op        operationView
	JSON      string
	List      string
}

// serveOperation serves the page of an operation: a GetRun and a GetOperation call.
func (h *Handler) serveOperation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o, err := ownerOf(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	run, err := h.store.GetRun(r.Context(), o)
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	op, err := h.store.GetOperation(r.Context(), o, q.Get("id"))
	if err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	j := opPageJSON{Run: runOf(run, false), Live: !phase.IsTerminal(run.Phase), Operation: operationOf(op, true)}
	if wantJSON(r) {
		serveJSON(w, r, j)
		return
	}
	page := opPage{
		Title: "Operation " + vis(op.ID), Live: j.Live, ETag: jsonTag(j), RefreshMS: h.refresh.Milliseconds(), Every: h.refresh.String(),
		Run: h.runView(run), Op: h.operationView(op, h.clock.Now()), JSON: "op?" + withJSON(q), List: "./",
	}
	h.serveHTML(w, r, http.StatusOK, "op", page)
}
