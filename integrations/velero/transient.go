package velero

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/operations"
)

// markTransient returns err wrapped with [operations.Retryable] when it carries a gRPC
// status whose code says the plugin may answer later, and err as it is otherwise. Those
// codes are Unavailable (a plugin process that died or restarts), DeadlineExceeded and
// ResourceExhausted. The code is found as status.Code finds it: on err, or on the first
// error of its chain (errors.As) that has a GRPCStatus method. A Velero plugin's own
// error reaches its server as code Unknown, and Velero's client gives it as a
// ProtoStackError, which hides its status: it is not marked, whatever code it was sent
// with. The text is kept, so an operation that fails records the plugin's message as
// Velero does.
func markTransient(err error) error {
	switch status.Code(err) { // Unknown for an error without a status
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return operations.Retryable(err)
	}
	return err
}
