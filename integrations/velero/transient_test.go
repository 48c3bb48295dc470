package velero_test

import (
	"fmt"
	"testing"

	pkgerrors "github.com/pkg/errors"
	"github.com/stretchr/testify/require"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework/common"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations/monitor"
)

// TestTransientGRPC checks monitor.Transient, which reads gRPC codes without importing
// grpc, against the errors of real gRPC statuses and of Velero's plugin client: a plugin
// process that is gone or busy (Unavailable, DeadlineExceeded, ResourceExhausted, as the
// client gets them, or through Velero's FromGRPCError when they carry no stack) is
// transient; a plugin's own error, which Velero's plugin server sends with code Unknown
// and a stack and its client turns into a ProtoStackError, is not, and neither is a
// ProtoStackError of another code, which hides its status.
func TestTransientGRPC(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Unavailable", status.Error(codes.Unavailable, "connection error"), true},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "too many requests"), true},
		{"Unavailable, wrapped", fmt.Errorf("progress: %w", status.Error(codes.Unavailable, "x")), true},
		{"Unavailable through FromGRPCError", common.FromGRPCError(status.Error(codes.Unavailable, "x")), true},
		{"Unknown", status.Error(codes.Unknown, "bucket gone"), false},
		{"Internal", status.Error(codes.Internal, "x"), false},
		{"a plugin's error", common.FromGRPCError(common.NewGRPCError(pkgerrors.New("bucket gone"))), false},
		{"a plugin's error sent as Unavailable", common.FromGRPCError(common.NewGRPCErrorWithCode(pkgerrors.New("x"), codes.Unavailable)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, monitor.Transient(tc.err), "%T: %v", tc.err, tc.err)
		})
	}
	var stack *common.ProtoStackError
	require.ErrorAs(t, tests[7].err, &stack, "Velero's client makes a ProtoStackError of a plugin's error")
}
