package monitor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/itemops/itemops/operations"
)

// Defaults of a [RetryPolicy]'s fields left zero.
const (
	DefaultBackoffCoefficient = 2.0
	DefaultMaxInterval        = 5 * time.Minute
)

// A RetryPolicy says which errors of a plugin's Progress a Monitor retries, and how: an
// operation whose Progress returns an error the policy calls transient is not failed but
// asked again after a wait that grows with each error in a row (InitialInterval, times
// BackoffCoefficient for each error after the first, at most MaxInterval), until an
// answer comes, which resets the count, or until MaxAttempts errors in a row or
// MaxElapsed since the first of them, which fail the operation with the last error's
// text followed by how many attempts were made over how long, such as
// "rpc error: code = Unavailable (after 5 attempts over 3m10s)". Every other error fails
// the operation at once with its text, as Velero does. The operation's timeout bounds
// the retries too: a transient error that comes past it cancels and fails the operation
// with [TimeoutMessage], the error's text appended.
//
// The zero RetryPolicy is off: the first error fails the operation, as in Velero. A
// policy is on when it bounds its retries (MaxAttempts or MaxElapsed); one that sets
// other fields without a bound is invalid (see [RetryPolicy.Validate]).
//
// The waits have no jitter: an operation's schedule follows from its errors and the
// Monitor's clock alone, so that it can be tested on a fake clock and read back from the
// store. The worker bound ([WithWorkers]) is what keeps a plugin from being called by
// many operations at once.
//
// The count of errors, the time of the first and the time of the next poll are kept in
// the operation's record ([operations.MonitorState]), so that they go on across a
// restart of the Monitor or a handover of the run to another Monitor. An operation
// waiting for its next poll costs a pass no plugin call and no write (see [PollResult]).
//
// When the store fails a write of the Monitor's (or its answer is lost), the Monitor
// keeps what the write was to record of each unfinished operation, and starts the next
// check of the operation from it while the store still holds what the write started
// from: an answer that the store missed still ends the row, and an error that it missed
// still counts in it, so the count and the message are of errors that came in a row. A
// Monitor that takes the run over, or a new one after a restart, knows only what the
// store holds: an answer whose write the store missed before is unknown to it.
type RetryPolicy struct {
	// InitialInterval is the wait after the first error. Zero: no wait; the operation
	// is asked again at the next pass, and every wait is zero.
	InitialInterval time.Duration
	// BackoffCoefficient multiplies the wait after each error in a row; at least 1.
	// Zero means [DefaultBackoffCoefficient].
	BackoffCoefficient float64
	// MaxInterval caps one wait; at least InitialInterval. Zero means
	// [DefaultMaxInterval], or InitialInterval when that is longer.
	MaxInterval time.Duration
	// MaxAttempts is how many errors in a row, the first included, fail the
	// operation. Zero: no bound on the count.
	MaxAttempts int
	// MaxElapsed is how long after the first error in a row an error fails the
	// operation; no wait runs past it, so the last poll comes at that time. Zero: no
	// bound on the time.
	MaxElapsed time.Duration
	// Retryable tells the errors to retry: the classification of a plugin's errors,
	// for a caller whose plugins report transient errors in a way of their own (a
	// gRPC status code, an HTTP status) and whose client does not mark them with
	// [operations.Retryable]. Nil means [Transient]; a Retryable of one's own usually
	// calls Transient too. Whatever it says, an error wrapping
	// [operations.ErrInvalidOperationID] or [operations.ErrAsyncOperationsNotSupported]
	// is not retried: it cannot heal.
	Retryable func(error) bool
}

// Validate returns an error wrapping [operations.ErrInvalid] when p has a negative
// field, a BackoffCoefficient that is not a number, infinite or below 1 (but for zero),
// a MaxInterval below InitialInterval, or fields set without MaxAttempts or MaxElapsed
// to bound the retries. The zero RetryPolicy is valid.
func (p RetryPolicy) Validate() error {
	var why string
	switch {
	case p.InitialInterval < 0 || p.MaxInterval < 0 || p.MaxElapsed < 0 || p.MaxAttempts < 0:
		why = "a negative field"
	case math.IsNaN(p.BackoffCoefficient) || math.IsInf(p.BackoffCoefficient, 0) || p.BackoffCoefficient != 0 && p.BackoffCoefficient < 1:
		why = fmt.Sprintf("backoff coefficient %v, not a number of at least 1", p.BackoffCoefficient)
	case p.MaxInterval != 0 && p.MaxInterval < p.InitialInterval:
		why = fmt.Sprintf("max interval %s below initial interval %s", p.MaxInterval, p.InitialInterval)
	case !p.on() && (p.InitialInterval != 0 || p.BackoffCoefficient != 0 || p.MaxInterval != 0 || p.Retryable != nil):
		why = "no bound on the retries: set MaxAttempts or MaxElapsed"
	default:
		return nil
	}
	return fmt.Errorf("retry policy: %s: %w", why, operations.ErrInvalid)
}

// on reports whether p retries at all: whether it bounds its retries.
func (p RetryPolicy) on() bool { return p.MaxAttempts > 0 || p.MaxElapsed > 0 }

// retries reports whether p retries err.
func (p RetryPolicy) retries(err error) bool {
	if permanent(err) {
		return false
	}
	if p.Retryable != nil {
		return p.Retryable(err)
	}
	return Transient(err)
}

// delay returns the wait after the attempt-th error in a row, counting from 1.
func (p RetryPolicy) delay(attempt int) time.Duration {
	if p.InitialInterval == 0 {
		return 0
	}
	coefficient := p.BackoffCoefficient
	if coefficient == 0 {
		coefficient = DefaultBackoffCoefficient
	}
	limit := p.MaxInterval
	if limit == 0 {
		limit = max(DefaultMaxInterval, p.InitialInterval)
	}
	// In floating point, so that a long row of errors overflows to +Inf, above limit.
	if d := float64(p.InitialInterval) * math.Pow(coefficient, float64(attempt-1)); d < float64(limit) {
		return time.Duration(d)
	}
	return limit
}

// exhausted reports whether the attempts of ms, whose last error came at now, fail the
// operation under p.
func (p RetryPolicy) exhausted(ms operations.MonitorState, now time.Time) bool {
	return p.MaxAttempts > 0 && ms.Attempts >= p.MaxAttempts || p.MaxElapsed > 0 && now.Sub(ms.ErrorSince) >= p.MaxElapsed
}

// Transient reports whether err is one that a plugin may answer later, which a
// [RetryPolicy] without a Retryable of its own retries:
//
//   - an error wrapping [operations.ErrRetry]: the plugin, or the client that speaks to
//     it, marked the error transient (see [operations.Retryable]);
//   - an error wrapping [context.DeadlineExceeded]: a plugin call that did not answer
//     within the call timeout ([WithCallTimeout]), or a plugin's own deadline.
//
// Transient knows no transport: this module does not depend on gRPC, and an error's
// text or shape is no contract. A gRPC status error (code Unavailable, say) is
// transient only once marked: the client of a gRPC plugin wraps the codes it deems
// transient with [operations.Retryable], as the Resolver of integrations/velero does
// for Unavailable, DeadlineExceeded and ResourceExhausted, or a policy's Retryable
// classifies the errors itself (docs/timeouts.md shows both).
//
// An error wrapping [operations.ErrInvalidOperationID] or
// [operations.ErrAsyncOperationsNotSupported] is not transient, whatever else it wraps;
// nor is a plugin's panic, nor context.Canceled, nor nil.
func Transient(err error) bool {
	if err == nil || permanent(err) {
		return false
	}
	return errors.Is(err, operations.ErrRetry) || errors.Is(err, context.DeadlineExceeded)
}

// permanent reports whether err is one that cannot heal: the plugin does not know the
// operation, or runs none for the item.
func permanent(err error) bool {
	return errors.Is(err, operations.ErrInvalidOperationID) || errors.Is(err, operations.ErrAsyncOperationsNotSupported)
}

// noAnswerError is the error of a plugin call that did not answer within the call
// timeout: "no answer within 30s", which Velero's messages keep. It wraps
// context.DeadlineExceeded, so that [Transient] retries it.
type noAnswerError struct{ timeout time.Duration }

func (e *noAnswerError) Error() string { return fmt.Sprintf("no answer within %s", e.timeout) }
func (e *noAnswerError) Unwrap() error { return context.DeadlineExceeded }
