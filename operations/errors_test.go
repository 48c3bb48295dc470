package operations_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
)

func TestOperationError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantIs     error
		wantIsNot  error
		wantAction string
		wantID     string
		wantText   string
	}{
		{
			name:       "AsyncOperationsNotSupported",
			err:        operations.AsyncOperationsNotSupported("example.io/snap", "op-1"),
			wantIs:     operations.ErrAsyncOperationsNotSupported,
			wantIsNot:  operations.ErrInvalidOperationID,
			wantAction: "example.io/snap", wantID: "op-1",
			wantText: `example.io/snap: operation "op-1": asynchronous operations not supported`,
		},
		{
			name:       "InvalidOperationID",
			err:        operations.InvalidOperationID("example.io/snap", "op-2"),
			wantIs:     operations.ErrInvalidOperationID,
			wantIsNot:  operations.ErrAsyncOperationsNotSupported,
			wantAction: "example.io/snap", wantID: "op-2",
			wantText: `example.io/snap: operation "op-2": invalid operation ID`,
		},
		{
			name:      "without an action",
			err:       operations.InvalidOperationID("", "op-3"),
			wantIs:    operations.ErrInvalidOperationID,
			wantIsNot: operations.ErrNotFound,
			wantID:    "op-3",
			wantText:  `operation "op-3": invalid operation ID`,
		},
		{
			name:       "wrapped again by a caller",
			err:        fmt.Errorf("poll: %w", operations.AsyncOperationsNotSupported("a", "op-4")),
			wantIs:     operations.ErrAsyncOperationsNotSupported,
			wantIsNot:  operations.ErrInvalidOperationID,
			wantAction: "a", wantID: "op-4",
			wantText: `poll: a: operation "op-4": asynchronous operations not supported`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.err, tc.wantIs)
			require.NotErrorIs(t, tc.err, tc.wantIsNot)
			var oe *operations.OperationError
			require.True(t, errors.As(tc.err, &oe), "errors.As(%v, *OperationError) = false", tc.err)
			if oe.Action != tc.wantAction || oe.OperationID != tc.wantID || oe.Err != tc.wantIs {
				t.Errorf("OperationError = {Action: %q, OperationID: %q, Err: %v}, want {%q, %q, %v}",
					oe.Action, oe.OperationID, oe.Err, tc.wantAction, tc.wantID, tc.wantIs)
			}
			if got := tc.err.Error(); got != tc.wantText {
				t.Errorf("Error() = %q, want %q", got, tc.wantText)
			}
		})
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	sentinels := []error{
		operations.ErrNotFound, operations.ErrExists, operations.ErrConflict, operations.ErrInvalid,
		operations.ErrAsyncOperationsNotSupported, operations.ErrInvalidOperationID,
	}
	for i, a := range sentinels {
		for j, b := range sentinels {
			if i != j && errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = true, want false", a, b)
			}
		}
	}
}

// TestRetryable checks that Retryable keeps the error's text and identity and adds
// ErrRetry, and that nil stays nil.
func TestRetryable(t *testing.T) {
	base := operations.InvalidOperationID("example.io/snap", "op-1")
	err := operations.Retryable(fmt.Errorf("wrapped: %w", base))
	require.EqualError(t, err, `wrapped: example.io/snap: operation "op-1": invalid operation ID`)
	require.ErrorIs(t, err, operations.ErrRetry)
	require.ErrorIs(t, err, operations.ErrInvalidOperationID)
	var oe *operations.OperationError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "op-1", oe.OperationID)
	require.NotErrorIs(t, base, operations.ErrRetry)
	require.NoError(t, operations.Retryable(nil))
}
