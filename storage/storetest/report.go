package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The checks report every failure in one style: a sentence that says which call
// returned what and what the contract wants instead, and, for values, a go-cmp diff
// marked (-want +got). The helpers below stop the check (t.Fatalf), since what follows
// a broken call usually depends on it; the checks that can go on use t.Errorf with the
// same sentences.

// noError stops the check when err is not nil. call names the call, as a format.
func noError(t testing.TB, err error, call string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s returned the error %q, want none", fmt.Sprintf(call, args...), err)
	}
}

// wantError stops the check unless err wraps target.
func wantError(t testing.TB, err, target error, call string, args ...any) {
	t.Helper()
	if msg := errorMismatch(err, target, fmt.Sprintf(call, args...)); msg != "" {
		t.Fatal(msg)
	}
}

// errorMismatch returns the sentence that reports err, returned by call, unless it wraps
// target; else "".
func errorMismatch(err, target error, call string) string {
	switch {
	case errors.Is(err, target):
		return ""
	case err == nil:
		return fmt.Sprintf("%s returned no error, want one wrapping %s", call, errName(target))
	}
	return fmt.Sprintf("%s returned the error %q, want one wrapping %s", call, err, errName(target))
}

// wantEqual stops the check when got differs from want, compared as the package
// documentation says. what names the value, as a format.
func wantEqual(t testing.TB, want, got any, what string, args ...any) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Fatalf("%s (-want +got):\n%s", fmt.Sprintf(what, args...), d)
	}
}

// sentinels names the errors the checks look for, for the failure messages.
var sentinels = []struct {
	err  error
	name string
}{
	{operations.ErrUIDMismatch, "operations.ErrUIDMismatch"},
	{operations.ErrNotFound, "operations.ErrNotFound"},
	{operations.ErrExists, "operations.ErrExists"},
	{operations.ErrConflict, "operations.ErrConflict"},
	{operations.ErrRunEnded, "operations.ErrRunEnded"},
	{operations.ErrInvalid, "operations.ErrInvalid"},
	{operations.ErrCorrupt, "operations.ErrCorrupt"},
	{phase.ErrInvalidTransition, "phase.ErrInvalidTransition"},
	{phase.ErrUnknownPhase, "phase.ErrUnknownPhase"},
	{phase.ErrUnknownKind, "phase.ErrUnknownKind"},
	{context.Canceled, "context.Canceled"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
}

// errName returns the Go name of a sentinel error, or its text, quoted.
func errName(err error) string {
	for _, s := range sentinels {
		if s.err == err {
			return s.name
		}
	}
	return fmt.Sprintf("%q", err)
}
