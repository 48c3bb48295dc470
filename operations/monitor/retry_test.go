package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
)

func TestRetryPolicyValidate(t *testing.T) {
	always := func(error) bool { return true }
	tests := []struct {
		name  string
		p     monitor.RetryPolicy
		valid bool
	}{
		{"zero: off", monitor.RetryPolicy{}, true},
		{"attempts alone", monitor.RetryPolicy{MaxAttempts: 3}, true},
		{"elapsed alone", monitor.RetryPolicy{MaxElapsed: time.Minute}, true},
		{"every field", monitor.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaxInterval: time.Minute,
			MaxAttempts: 5, MaxElapsed: time.Hour, Retryable: always}, true},
		{"coefficient 1", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: 1}, true},
		{"max interval equal to the initial", monitor.RetryPolicy{MaxAttempts: 1, InitialInterval: time.Second, MaxInterval: time.Second}, true},
		{"initial interval above the default max", monitor.RetryPolicy{MaxAttempts: 1, InitialInterval: time.Hour}, true},
		{"negative initial interval", monitor.RetryPolicy{MaxAttempts: 1, InitialInterval: -1}, false},
		{"negative max interval", monitor.RetryPolicy{MaxAttempts: 1, MaxInterval: -1}, false},
		{"negative attempts", monitor.RetryPolicy{MaxAttempts: -1}, false},
		{"negative elapsed", monitor.RetryPolicy{MaxAttempts: 1, MaxElapsed: -1}, false},
		{"coefficient below 1", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: 0.5}, false},
		{"negative coefficient", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: -2}, false},
		{"coefficient NaN", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: math.NaN()}, false},
		{"coefficient infinite", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: math.Inf(1)}, false},
		{"max interval below the initial", monitor.RetryPolicy{MaxAttempts: 1, InitialInterval: time.Minute, MaxInterval: time.Second}, false},
		{"an interval without a bound", monitor.RetryPolicy{InitialInterval: time.Second}, false},
		{"a classifier without a bound", monitor.RetryPolicy{Retryable: always}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.valid {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operations.ErrInvalid)
		})
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	tests := []struct {
		name string
		p    monitor.RetryPolicy
		want []time.Duration // after errors 1, 2, 3, ...
	}{
		{"no initial interval: every pass", monitor.RetryPolicy{MaxAttempts: 9, BackoffCoefficient: 3}, []time.Duration{0, 0, 0}},
		{"the defaults: doubling, up to 5m", monitor.RetryPolicy{MaxAttempts: 9, InitialInterval: time.Minute},
			[]time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}},
		{"coefficient 1: constant", monitor.RetryPolicy{MaxAttempts: 9, InitialInterval: 10 * time.Second, BackoffCoefficient: 1},
			[]time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"coefficient 1.5, capped", monitor.RetryPolicy{MaxAttempts: 9, InitialInterval: 10 * time.Second, BackoffCoefficient: 1.5, MaxInterval: 30 * time.Second},
			[]time.Duration{10 * time.Second, 15 * time.Second, 22500 * time.Millisecond, 30 * time.Second}},
		{"initial above the default max", monitor.RetryPolicy{MaxAttempts: 9, InitialInterval: time.Hour}, []time.Duration{time.Hour, time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []time.Duration
			for n := 1; n <= len(tc.want); n++ {
				got = append(got, tc.p.Delay(n))
			}
			require.Equal(t, tc.want, got)
		})
	}
	// A long row of errors stays at the cap, with no overflow.
	p := monitor.RetryPolicy{MaxAttempts: 9, InitialInterval: time.Second, BackoffCoefficient: 10, MaxInterval: time.Hour}
	for _, n := range []int{20, 100, 1 << 20, math.MaxInt} {
		require.Equal(t, time.Hour, p.Delay(n), "error %d", n)
	}
}

// grpcStatus and grpcError have the shape of google.golang.org/grpc/status's Status and
// of the errors it makes: GRPCStatus returning a value with a Code. Transient does not
// read it: a gRPC error is transient once its client marks it (markedGRPC).
type (
	grpcCode   uint32
	grpcStatus struct{ code grpcCode }
	grpcError  struct{ s *grpcStatus }
)

func (s *grpcStatus) Code() grpcCode         { return s.code }
func (e *grpcError) Error() string           { return fmt.Sprintf("rpc error: code = %d", e.s.code) }
func (e *grpcError) GRPCStatus() *grpcStatus { return e.s }
func grpcErr(code grpcCode) error            { return &grpcError{&grpcStatus{code}} }

// markedGRPC is a gRPC error of the given code as the client of a gRPC plugin that
// deems the code transient returns it: wrapped with operations.Retryable, its text
// kept (integrations/velero's Resolver does so for Unavailable, DeadlineExceeded and
// ResourceExhausted).
func markedGRPC(code grpcCode) error { return operations.Retryable(grpcErr(code)) }

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a plain error", errors.New("bucket gone"), false},
		{"ErrRetry", operations.ErrRetry, true},
		{"Retryable", operations.Retryable(errors.New("busy")), true},
		{"Retryable, wrapped", fmt.Errorf("call: %w", operations.Retryable(errors.New("busy"))), true},
		{"a call given up", fmt.Errorf("progress: %w", monitor.NoAnswer(time.Second)), true},
		{"the plugin's own deadline", fmt.Errorf("get snapshot: %w", context.DeadlineExceeded), true},
		{"cancelled", context.Canceled, false},
		{"gRPC Unavailable, marked by its client", markedGRPC(14), true},
		{"gRPC Unavailable, marked, wrapped", fmt.Errorf("plugin: %w", markedGRPC(14)), true},
		{"gRPC Unavailable, marked, joined", errors.Join(errors.New("x"), markedGRPC(14)), true},
		{"gRPC Unavailable, unmarked: no transport is read", grpcErr(14), false},
		{"gRPC DeadlineExceeded, unmarked", grpcErr(4), false},
		{"gRPC Unknown", grpcErr(2), false},
		{"invalid operation ID, made retryable", operations.Retryable(operations.InvalidOperationID("p", "op")), false},
		{"not supported, made retryable", operations.Retryable(operations.AsyncOperationsNotSupported("p", "op")), false},
		{"not supported, over a marked gRPC Unavailable", errors.Join(markedGRPC(14), operations.ErrAsyncOperationsNotSupported), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, monitor.Transient(tc.err))
		})
	}
}
