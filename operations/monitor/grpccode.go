package monitor

import (
	"errors"
	"reflect"
)

// The gRPC status codes that Transient retries, as the gRPC specification numbers them.
// This module does not require google.golang.org/grpc (see docs/architecture.md on
// dependencies), so the codes are read by reflection (see grpcCode).
const (
	grpcDeadlineExceeded  = 4
	grpcResourceExhausted = 8
	grpcUnavailable       = 14
)

// grpcCode returns the gRPC status code of err, as google.golang.org/grpc/status.FromError
// finds it: the code of the first error in err's chain (errors.Unwrap, or Unwrap() []error
// depth first, as errors.As walks it) with a method GRPCStatus() returning a non-nil
// value with a method Code() of an unsigned 32-bit kind. ok is false when no error of the
// chain has such a method, or when one of them panics.
func grpcCode(err error) (code uint32, ok bool) {
	for err != nil {
		if code, ok := ownGRPCCode(err); ok {
			return code, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if code, ok := grpcCode(e); ok {
					return code, true
				}
			}
			return 0, false
		default:
			err = errors.Unwrap(err)
		}
	}
	return 0, false
}

// ownGRPCCode returns the code of err's own GRPCStatus method, not of the errors it
// wraps. The methods belong to a plugin's client: a panic in them is recovered and
// reported as no code.
func ownGRPCCode(err error) (code uint32, ok bool) {
	defer func() {
		if recover() != nil {
			code, ok = 0, false
		}
	}()
	status := reflect.ValueOf(err).MethodByName("GRPCStatus")
	if !status.IsValid() || status.Type().NumIn() != 0 || status.Type().NumOut() != 1 {
		return 0, false
	}
	st := status.Call(nil)[0]
	switch st.Kind() {
	case reflect.Pointer, reflect.Interface:
		if st.IsNil() {
			return 0, false
		}
	}
	get := st.MethodByName("Code")
	if !get.IsValid() || get.Type().NumIn() != 0 || get.Type().NumOut() != 1 || get.Type().Out(0).Kind() != reflect.Uint32 {
		return 0, false
	}
	return uint32(get.Call(nil)[0].Uint()), true
}
