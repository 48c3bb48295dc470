package webview

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

//go:embed assets
var assets embed.FS

// A Handler serves the web view of one store (see the package documentation). It is
// safe for concurrent use: it keeps nothing that changes after [New], and every request
// reads the store afresh.
type Handler struct {
	store     operations.Store
	clock     clock.Clock
	authorize func(*http.Request, Action) error
	pageSize  int
	refresh   time.Duration
	key       []byte // the HMAC key of the cancel tokens, made by New
	pages     map[string]*template.Template
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler that shows the runs and operations of store. It fails with an
// error wrapping [ErrInvalidOption] when an option is out of range, and with the error of
// the system's random source, when it cannot make the key of the cancel tokens. New
// reads nothing from store.
func New(store operations.Store, opts ...Option) (*Handler, error) {
	if store == nil {
		return nil, fmt.Errorf("webview.New: nil store: %w", ErrInvalidOption)
	}
	cfg := config{clock: clock.System{}, pageSize: 50, refresh: 5 * time.Second}
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("webview.New: cancel token key: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err // the embedded templates are fixed: only a bug of ours gets here
	}
	return &Handler{
		store: store, clock: cfg.clock, authorize: cfg.authorize, pageSize: cfg.pageSize,
		refresh: cfg.refresh, key: key, pages: pages,
	}, nil
}

// ServeHTTP serves one request. The path is read relative to where the handler is
// mounted: mount it with [http.StripPrefix] under a prefix of one's own. A store error
// gives 404 Not Found for [operations.ErrNotFound], 503 Service Unavailable when the
// request's context ended, and 500 Internal Server Error otherwise, with the error's
// text.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	p := strings.TrimPrefix(r.URL.Path, "/")
	if p == "cancel" {
		h.serveCancel(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		h.fail(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed", r.Method))
		return
	}
	switch p {
	case "":
		if to, ok := slashRedirect(r); ok {
			redirect(w, to, http.StatusMovedPermanently)
			return
		}
		h.serveRuns(w, r)
	case "run":
		h.serveRun(w, r)
	case "op":
		h.serveOperation(w, r)
	case "static/view.js", "static/view.css":
		h.serveAsset(w, r, p)
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %q", p))
	}
}

// slashRedirect returns where a request for the mount point without its trailing slash
// ("/ops" for a handler under http.StripPrefix("/ops", h)) is sent, so that the pages'
// relative links resolve under the prefix. The request's URI is what the client sent,
// before any prefix was stripped.
func slashRedirect(r *http.Request) (string, bool) {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return "", false
	}
	to := path.Base(u.Path) + "/"
	if u.RawQuery != "" {
		to += "?" + u.RawQuery
	}
	return to, true
}

// serveAsset serves an embedded file.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, p string) {
	b, err := assets.ReadFile("assets/" + strings.TrimPrefix(p, "static/"))
	if err != nil {
		h.fail(w, r, http.StatusNotFound, err)
		return
	}
	ctype := "text/css; charset=utf-8"
	if strings.HasSuffix(p, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	serveTagged(w, r, b)
}

// serveTagged writes body with an ETag of its contents, or 304 Not Modified when the
// request's If-None-Match names that tag.
func serveTagged(w http.ResponseWriter, r *http.Request, body []byte) {
	tag := etag(body)
	w.Header().Set("ETag", tag)
	if matchTag(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// etag returns a strong entity tag of body.
func etag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// matchTag reports whether the If-None-Match header value list names tag, or is "*".
func matchTag(list, tag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}

// wantJSON reports whether the request asks for the JSON form of its page.
func wantJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// encodeJSON returns the JSON form of a page's value, as it is served.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// serveJSON writes v as the JSON form of a page.
func serveJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	serveTagged(w, r, b)
}

// jsonTag returns the ETag that the JSON form of v has, for a page to hand its script;
// empty (the script's first ask then gets the form) when v does not encode.
func jsonTag(v any) string {
	b, err := encodeJSON(v)
	if err != nil {
		return ""
	}
	return etag(b)
}

// serveHTML renders the page named page with data.
func (h *Handler) serveHTML(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	var buf bytes.Buffer
	if err := h.pages[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if status != http.StatusOK {
		w.WriteHeader(status)
		_, _ = w.Write(buf.Bytes())
		return
	}
	serveTagged(w, r, buf.Bytes())
}

// statusOf returns the HTTP status of a store error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, operations.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	case errors.Is(err, operations.ErrRunEnded), errors.Is(err, operations.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, operations.ErrInvalid):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// errorPage is what an error page shows.
type errorPage struct {
	Title   string
	Status  int
	Message string
}

// fail answers with an error: as JSON ({"error": text}) when the request asked for
// JSON, else as a page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if wantJSON(r) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{err.Error()})
		return
	}
	h.serveHTML(w, r, status, "error", errorPage{
		Title: http.StatusText(status), Status: status, Message: vis(err.Error()),
	})
}

// tokenOf returns the cancel token of the run of o: the HMAC-SHA256, under the key New
// made, of its kind, name and UID. A page writes it in hexadecimal.
func (h *Handler) tokenOf(o operations.Owner) []byte {
	m := hmac.New(sha256.New, h.key)
	for _, s := range []string{"cancel", string(o.Kind), o.Name, o.UID} {
		// Each field with its length, so that no two owners give the same input.
		fmt.Fprintf(m, "%d:%s;", len(s), s)
	}
	return m.Sum(nil)
}

// serveCancel records a cancel request, after the checks the package documentation
// lists, and sends the browser back to the run's page.
func (h *Handler) serveCancel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.fail(w, r, http.StatusMethodNotAllowed, errors.New("a cancel is sent by POST"))
		return
	}
	if h.authorize == nil {
		h.fail(w, r, http.StatusForbidden, errors.New("this view is read-only"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, err)
		return
	}
	// The run comes as one query-encoded field, which keeps every byte of a name (an
	// HTML attribute cannot hold a NUL).
	run, err := url.ParseQuery(r.PostForm.Get("run"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("run field: %w", err))
		return
	}
	o := operations.Owner{Kind: kindOf(run.Get("kind")), Name: run.Get("name"), UID: run.Get("uid")}
	got, err := hex.DecodeString(r.PostForm.Get("token"))
	if err != nil || !hmac.Equal(got, h.tokenOf(o)) {
		h.fail(w, r, http.StatusForbidden, errors.New("the cancel token does not match the run: reload its page and try again"))
		return
	}
	if err := h.authorize(r, Action{Verb: VerbCancel, Run: o}); err != nil {
		h.fail(w, r, http.StatusForbidden, fmt.Errorf("cancel refused: %w", err))
		return
	}
	reason := r.PostForm.Get("reason")
	if reason == "" {
		reason = "cancelled from the web view"
	}
	if _, err := operations.RequestCancel(r.Context(), h.store, o, reason, h.clock.Now()); err != nil {
		h.fail(w, r, statusOf(err), err)
		return
	}
	redirect(w, runHref(o), http.StatusSeeOther)
}

// redirect sends the client to the relative reference to, as it is. http.Redirect would
// make it absolute from the request's path, which lost its prefix under
// http.StripPrefix.
func redirect(w http.ResponseWriter, to string, status int) {
	w.Header().Set("Location", to)
	w.WriteHeader(status)
}
