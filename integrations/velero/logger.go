package velero

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// Logger returns a *slog.Logger, what monitor.WithLogger takes, that writes through
// Velero's logrus logger l: each record goes to l with its attributes as logrus fields
// (a group's attributes named "group.key"), at the logrus level of its slog level
// (Debug, Info, Warn, Error; levels between round down). Records below the level of l
// are dropped when l is a *logrus.Logger or *logrus.Entry, as l would drop them. A nil
// l gives a Logger that writes nothing. The Logger is safe for concurrent use when l
// is, as logrus's loggers are.
func Logger(l logrus.FieldLogger) *slog.Logger {
	if l == nil {
		return slog.New(discard{})
	}
	return slog.New(logrusHandler{l: l})
}

// logrusHandler is a slog.Handler writing to a logrus.FieldLogger. attrs holds the
// fields added by WithAttrs, group the prefix added by WithGroup.
type logrusHandler struct {
	l     logrus.FieldLogger
	attrs logrus.Fields
	group string
}

func logrusLevel(level slog.Level) logrus.Level {
	switch {
	case level >= slog.LevelError:
		return logrus.ErrorLevel
	case level >= slog.LevelWarn:
		return logrus.WarnLevel
	case level >= slog.LevelInfo:
		return logrus.InfoLevel
	}
	return logrus.DebugLevel
}

func (h logrusHandler) Enabled(_ context.Context, level slog.Level) bool {
	switch l := h.l.(type) {
	case *logrus.Logger:
		return l.IsLevelEnabled(logrusLevel(level))
	case *logrus.Entry:
		return l.Logger == nil || l.Logger.IsLevelEnabled(logrusLevel(level))
	}
	return true
}

func (h logrusHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make(logrus.Fields, len(h.attrs)+r.NumAttrs())
	for k, v := range h.attrs {
		fields[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(fields, h.group, a)
		return true
	})
	e := h.l.WithFields(fields)
	switch logrusLevel(r.Level) {
	case logrus.ErrorLevel:
		e.Error(r.Message)
	case logrus.WarnLevel:
		e.Warn(r.Message)
	case logrus.InfoLevel:
		e.Info(r.Message)
	default:
		e.Debug(r.Message)
	}
	return nil
}

func (h logrusHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make(logrus.Fields, len(h.attrs)+len(attrs))
	for k, v := range h.attrs {
		fields[k] = v
	}
	for _, a := range attrs {
		addAttr(fields, h.group, a)
	}
	return logrusHandler{l: h.l, attrs: fields, group: h.group}
}

func (h logrusHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return logrusHandler{l: h.l, attrs: h.attrs, group: h.group + name + "."}
}

// addAttr adds a to fields under prefix, a group's attributes one by one.
func addAttr(fields logrus.Fields, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			addAttr(fields, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	fields[prefix+a.Key] = v.Any()
}

// discard is a slog.Handler that writes nothing.
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }
