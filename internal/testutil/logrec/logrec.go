// Package logrec keeps what a [log/slog.Logger] logs, so that a test can assert what a
// Monitor or a store logged.
package logrec

import (
	"context"
	"log/slog"
	"sync"
)

// A Recorder is a slog.Handler that keeps every record it is given, as its message
// followed by its attributes (key=value), by level. It is safe for concurrent use; the
// attributes and groups of slog.Logger.With and WithGroup are dropped.
type Recorder struct {
	mu   sync.Mutex
	kept map[slog.Level][]string
}

// Logger returns a logger that logs into a new Recorder, and the Recorder.
func Logger() (*slog.Logger, *Recorder) {
	r := &Recorder{}
	return slog.New(r), r
}

// At returns the records kept at level l, in the order they were logged.
func (r *Recorder) At(l slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.kept[l]...)
}

// Enabled, WithAttrs, WithGroup and Handle make a Recorder a slog.Handler.

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *Recorder) WithGroup(string) slog.Handler            { return r }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	text := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		text += " " + a.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kept == nil {
		r.kept = make(map[slog.Level][]string)
	}
	r.kept[rec.Level] = append(r.kept[rec.Level], text)
	return nil
}
