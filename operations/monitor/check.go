package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/itemops/itemops/operations"
)

// check asks the plugin about operation i and stores the operation as it should be
// written, and whether it changed. Every problem becomes the operation's own failure. It
// returns false when one of its plugin calls was given up; the calling goroutine must
// then leave the poll alone.
func (l *lane) check(i int) bool {
	c := l.c
	op := c.ops[i]
	now := stamp(c.m.cfg.clock)
	tracker, err := c.m.resolve(op.Action)
	if c.cancelReason != "" {
		// The run is being cancelled: cancel the operation, whatever its progress.
		cancel := pending{i: i, op: created(op, now), now: now, cancel: true}
		if err != nil {
			c.settle(&cancel, err)
			return true
		}
		_, err, ok := call(l, cancel, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, tracker.Cancel(ctx, op.Clone())
		})
		if ok {
			c.settle(&cancel, err)
		}
		return ok
	}
	progress := pending{i: i, op: op, now: now}
	var p operations.Progress
	if err == nil {
		var ok bool
		p, err, ok = call(l, progress, func(ctx context.Context) (operations.Progress, error) {
			return tracker.Progress(ctx, op.Clone())
		})
		if !ok {
			return false
		}
	}
	if err != nil {
		c.settle(&progress, err)
		return true
	}
	c.m.clearErrors(keyOf(op))
	next, expired := applyProgress(op, now, p, c.timeout)
	if expired {
		cancel := pending{i: i, op: next, now: now, cancel: true}
		if h := c.m.cfg.hooks.OperationTimedOut; h != nil {
			h(next.Clone())
		}
		_, err, ok := call(l, cancel, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, tracker.Cancel(ctx, op.Clone())
		})
		if ok {
			c.settle(&cancel, err)
		}
		return ok
	}
	c.ops[i], c.changed[i] = next, next.Status != op.Status
	return true
}

// progressFailed returns op as a Progress error err at now leaves it, and whether it
// changed: failed once the tolerated errors are used up. An error that comes from the
// poll's own end is not the plugin's: op is then left as it is.
func (c *checks) progressFailed(op operations.Operation, now time.Time, err error) (operations.Operation, bool) {
	if c.ctx.Err() != nil {
		return op, false
	}
	next := created(op, now)
	if !c.m.countError(keyOf(op), err) {
		c.m.cfg.logger.WarnContext(c.ctx, "progress error tolerated", "run", op.Owner.String(), "operation", op.ID, "error", err)
		return next, next.Status != op.Status
	}
	return failOperation(next, err.Error()), true
}

// cancelled returns op failed after its Cancel call, which returned cancelErr: for
// running past its timeout, or because its run is being cancelled. A plugin that does
// not cancel (ErrAsyncOperationsNotSupported, an error, a call given up) fails the
// operation all the same, with what it said appended.
func (c *checks) cancelled(op operations.Operation, cancelErr error) operations.Operation {
	msg := TimedOut
	if c.cancelReason != "" {
		msg = CancelledPrefix + c.cancelReason
	}
	if cancelErr != nil {
		c.m.cfg.logger.WarnContext(c.ctx, "cancel failed", "run", op.Owner.String(), "operation", op.ID, "error", cancelErr)
		msg += "; " + cancelErr.Error()
	}
	return failOperation(op, msg)
}

// applyProgress returns op as report p at now leaves it, and whether op ran past timeout
// and must be canceled.
func applyProgress(op operations.Operation, now time.Time, p operations.Progress, timeout time.Duration) (operations.Operation, bool) {
	next := created(op, now)
	if err := checkProgress(p); err != nil {
		return failOperation(next, err.Error()), false
	}
	next.Status.NCompleted, next.Status.NTotal = p.NCompleted, p.NTotal
	next.Status.OperationUnits, next.Status.Description = p.OperationUnits, p.Description
	if known(p.Started) {
		next.Status.Started = p.Started.Round(0).UTC()
	}
	if known(p.Updated) {
		next.Status.Updated = p.Updated.Round(0).UTC()
	}
	switch {
	case p.Completed && p.Err != "":
		return failOperation(next, p.Err), false
	case p.Completed:
		next.Status.Phase = operations.OperationCompleted
	case now.After(next.Status.Created.Add(timeout)):
		return next, true
	case next.Status.Phase == operations.OperationNew && known(p.Started):
		next.Status.Phase = operations.OperationInProgress
	}
	return next, false
}

// created returns op with a creation time: without one no timeout can be counted, so
// counting starts at now.
func created(op operations.Operation, now time.Time) operations.Operation {
	if op.Status.Created.IsZero() {
		op.Status.Created = now
	}
	return op
}

// known reports whether a plugin's time is set: plugins report the zero time or the Unix
// epoch when they do not know.
func known(t time.Time) bool { return !t.IsZero() && !t.Equal(time.Unix(0, 0)) }

// failOperation marks op failed with msg.
func failOperation(op operations.Operation, msg string) operations.Operation {
	op.Status.Phase = operations.OperationFailed
	op.Status.Error = msg
	return op
}

// checkProgress rejects a report that cannot be true.
func checkProgress(p operations.Progress) error {
	switch {
	case p.NCompleted < 0 || p.NTotal < 0:
		return fmt.Errorf("progress: plugin reported negative progress (%d of %d)", p.NCompleted, p.NTotal)
	case p.NTotal > 0 && p.NCompleted > p.NTotal:
		return fmt.Errorf("progress: plugin reported %d of %d %s completed", p.NCompleted, p.NTotal, p.OperationUnits)
	}
	return nil
}

// resolve finds the tracker of action; a resolver that panics is an error too.
func (m *Monitor) resolve(action string) (t operations.Tracker, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("resolve plugin %q: panic: %v", action, v)
		}
	}()
	t, err = m.resolver.Resolve(action)
	if err == nil && t == nil {
		err = errors.New("no tracker")
	}
	if err != nil {
		return nil, fmt.Errorf("resolve plugin %q: %w", action, err)
	}
	return t, nil
}

func keyOf(op operations.Operation) opKey { return opKey{op.Owner.Kind, op.Owner.Name, op.ID} }

// countError records a Progress error of key and reports whether it fails the operation.
func (m *Monitor) countError(key opKey, err error) bool {
	if errors.Is(err, operations.ErrInvalidOperationID) || errors.Is(err, operations.ErrAsyncOperationsNotSupported) {
		m.clearErrors(key)
		return true
	}
	m.errorsMu.Lock()
	defer m.errorsMu.Unlock()
	m.progressErrors[key]++
	if m.progressErrors[key] > m.cfg.tolerance {
		delete(m.progressErrors, key)
		return true
	}
	return false
}

func (m *Monitor) clearErrors(key opKey) {
	m.errorsMu.Lock()
	delete(m.progressErrors, key)
	m.errorsMu.Unlock()
}
