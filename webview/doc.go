// Package webview serves a web view of the runs and operations of any
// [operations.Store]: an [http.Handler] that an operator mounts on a mux of its own, as
// `itemops serve` does for a boltstore file. It uses the standard library alone; its
// templates, script and style sheet are embedded, so that it works where no CDN can be
// reached, and nothing is built with Node.
//
//	h, err := webview.New(store)
//	if err != nil { ... }
//	mux.Handle("/ops/", http.StripPrefix("/ops/", h))
//
// # Pages
//
// Every path is relative to where the handler is mounted, and every link a page holds is
// relative too, so that the view works under a path prefix behind a proxy:
//
//   - "" (the mount point itself): the runs, in the store's order (by kind, then name),
//     a page at a time. The query selects: kind (Backup, Restore, or a kind of one's
//     own), phase (repeatable), q (a substring of the name, matched exactly, case
//     included), page (from 1) and size (runs per page; the default is 50 unless
//     [WithPageSize] says otherwise, and more than 500 counts as 500). The page costs one
//     ListRuns call, whatever the number of runs, and no call per run.
//   - "run?kind=K&name=N": a run: its counts, its phase history as a timeline, and its
//     operations, a page at a time (page and size as above), each with its action (the
//     name its plugin was registered under: an operation records no other name of its
//     plugin), resource, operation ID, phase, progress (n of m units, as a bar), last
//     update (the plugin's), how long it has stalled (since the Monitor last saw its
//     count move, or, where no stall timeout is set and the Monitor keeps no such time,
//     since the plugin's last update), next poll, attempts (the Monitor's retries of
//     failed polls in a row) and error. It costs a GetRun and a ListOperations call.
//   - "op?kind=K&name=N&id=ID": one operation, every field of it. It costs a GetRun and
//     a GetOperation call.
//   - "cancel": the form of a run page posts here (see Cancel below).
//   - "static/view.js" and "static/view.css": the embedded assets.
//
// # JSON
//
// Each page is also served as JSON: add format=json to its query. The JSON form holds the
// stored values as they are (texts unescaped, times in RFC 3339, absent times left out)
// and no value that depends on the time of the request, so that its ETag changes only
// when the store does. A request whose If-None-Match names the current ETag gets 304 Not
// Modified and no body. The query parameter was chosen over the Accept header so that
// the two forms have distinct URLs, which caches and proxies keep apart without a Vary
// header.
//
// # Live refresh
//
// A run page, and an operation page, of a run that is not in a terminal phase asks its
// JSON form again every few seconds (see [WithRefresh]) with the ETag it holds, from the
// embedded script; it redraws only when the answer is not 304, and stops once the run
// is terminal. Each ask costs the store the calls of the page (two); a redraw costs them
// twice. Without the script, a page shows the same thing and a reload updates it.
//
// # Cancel
//
// The view is read-only unless [WithAuthorize] gives it a hook. A run page then shows a
// cancel form, which posts to "cancel". A cancel must come by POST (else 405 Method Not
// Allowed), carry the token of the page that showed the form (else 403 Forbidden), and
// be consented to by the hook (else 403 Forbidden); it then calls
// [operations.RequestCancel], as `itemops cancel` does, and the Monitor that works on
// the store cancels the run's operations and fails it on its next pass. The token is an
// HMAC-SHA256, under a random key made by [New], of the run's kind, name and UID: a page
// of another site cannot read it (the same-origin policy), a token for one run cancels
// no other, nothing is kept per visitor, and a token dies with the Handler. A site that
// can run script in the view's origin can read the token, as with any CSRF token; the
// hook is what decides who may cancel.
//
// # Hostile text
//
// A store's texts (names, reasons, errors) come from plugins and users. Every one is
// escaped by html/template, and every rune that would show as nothing or reorder the
// text around it (controls, bidi controls, zero-width runes) is first shown as an escape
// such as \u202e, as `itemops inspect` shows it. The pages carry a
// Content-Security-Policy that allows the embedded script and style sheet alone and no
// framing.
package webview
