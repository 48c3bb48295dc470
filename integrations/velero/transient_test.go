package velero_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pkgerrors "github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vmware-tanzu/velero/pkg/plugin/framework/common"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// TestTransientGRPC holds the Resolver's classification of Progress errors to the
// errors a Velero plugin client really returns. monitor.Transient, the classification
// a retry policy uses by default, reads no gRPC status: none of these errors is
// transient to it as it is. The Resolver's Tracker marks gRPC's own status errors with
// the codes of a plugin that cannot answer now (operations.Retryable, the text kept),
// and Transient then retries them; a plugin's own error, which Velero's plugin server
// sends with code Unknown and a stack and its client turns into a ProtoStackError
// (FromGRPCError), is not marked, nor is a ProtoStackError of another code, which hides
// its status. Each error then comes from a plugin's Progress through the Resolver to a
// Monitor with a retry policy: a transient one leaves the operation waiting for its
// next poll, any other fails it at once with the plugin's text, as Velero does.
func TestTransientGRPC(t *testing.T) {
	own := common.FromGRPCError(common.NewGRPCError(pkgerrors.New("VolumeSnapshot snap-1 has an error: InvalidSnapshot.NotFound")))
	var stack *common.ProtoStackError
	require.ErrorAs(t, own, &stack, "Velero's client gives a plugin's own error as a ProtoStackError")
	require.Equal(t, "rpc error: code = Unknown desc = VolumeSnapshot snap-1 has an error: InvalidSnapshot.NotFound", own.Error(),
		"the server sent it with code Unknown")
	unavailable := status.Error(codes.Unavailable, `connection error: desc = "transport: error while dialing: dial unix /tmp/plugin: connect: connection refused"`)
	tests := []struct {
		name      string
		err       error
		transient bool
	}{
		{"Unavailable", unavailable, true},
		{"Unavailable through FromGRPCError", common.FromGRPCError(unavailable), true},
		{"Unavailable wrapped", fmt.Errorf("progress of operation-1: %w", unavailable), true},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), true},
		{"a plugin's own error", own, false},
		{"a plugin's own error sent as Unavailable", common.FromGRPCError(common.NewGRPCErrorWithCode(pkgerrors.New("x"), codes.Unavailable)), false},
		{"Unknown without a stack", status.Error(codes.Unknown, "snapshot failed"), false},
		{"Internal", status.Error(codes.Internal, "grpc: error unmarshalling request"), false},
		{"Unavailable's text alone", errors.New(unavailable.Error()), false},
	}
	policy := monitor.RetryPolicy{InitialInterval: time.Minute, MaxAttempts: 3}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.False(t, monitor.Transient(tc.err), "Transient(%v) of the error as the plugin client gives it", tc.err)

			h := newHarness(t, phase.Backup, phase.WaitingForPluginOperations, testNow)
			h.onProgress(vplugin.OperationProgress{}, tc.err)
			tr, err := h.resolver().Resolve(h.action)
			require.NoError(t, err)
			stored, err := h.store.GetOperation(context.Background(), h.owner, h.opID)
			require.NoError(t, err)
			_, got := tr.Progress(context.Background(), stored)
			require.EqualError(t, got, tc.err.Error(), "the Tracker keeps the plugin's text")
			require.ErrorIs(t, got, tc.err, "the Tracker's error wraps the plugin's")
			require.Equal(t, tc.transient, errors.Is(got, operations.ErrRetry), "marked with operations.Retryable")
			require.Equal(t, tc.transient, monitor.Transient(got), "Transient(%v) of the Tracker's error", got)

			_, _, op := h.poll(t, monitor.WithRetryPolicy(policy))
			wantPhase, wantError, wantState := operations.OperationFailed, tc.err.Error(), operations.MonitorState{}
			if tc.transient {
				wantPhase, wantError = operations.OperationNew, ""
				wantState = operations.MonitorState{Attempts: 1, ErrorSince: testNow, NextPoll: testNow.Add(time.Minute), LastError: tc.err.Error()}
			}
			require.Equal(t, wantPhase, op.Status.Phase)
			require.Equal(t, wantError, op.Status.Error)
			if diff := cmp.Diff(wantState, op.Monitor); diff != "" {
				t.Errorf("the operation's MonitorState (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryableReadsGRPCCode holds the policy that docs/timeouts.md ("Plugins over
// gRPC") gives a program whose gRPC plugins do not go through the Resolver: its
// Retryable retries the three transient codes, unmarked, and leaves the rest to
// monitor.Transient; the policy is valid.
func TestRetryableReadsGRPCCode(t *testing.T) {
	policy := monitor.RetryPolicy{
		InitialInterval: 10 * time.Second,
		MaxAttempts:     6,
		Retryable: func(err error) bool {
			switch status.Code(err) { // google.golang.org/grpc/status
			case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
				return true
			}
			return monitor.Transient(err)
		},
	}
	require.NoError(t, policy.Validate())
	for code, want := range map[codes.Code]bool{
		codes.Unavailable: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
		codes.Unknown: false, codes.NotFound: false, codes.Internal: false,
	} {
		err := fmt.Errorf("progress: %w", status.Error(code, "plugin"))
		require.Equal(t, want, policy.Retryable(err), "code %s", code)
	}
	require.True(t, policy.Retryable(operations.Retryable(errors.New("marked"))), "an error marked transient")
}
