package kubestore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestRefused tells the errors of writes that the API server did not apply from those
// whose outcome is unknown.
func TestRefused(t *testing.T) {
	lease := coordinationv1.Resource("leases")
	status := func(code int32) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code}}
	}
	lost := &url.Error{Op: "Put", URL: "https://kube/apis/coordination.k8s.io/v1/namespaces/n/leases/x", Err: syscall.ECONNRESET}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"409 Conflict", apierrors.NewConflict(lease, "x", errors.New("changed")), true},
		{"409 AlreadyExists", apierrors.NewAlreadyExists(lease, "x"), true},
		{"404 NotFound", apierrors.NewNotFound(lease, "x"), true},
		{"422 Invalid", apierrors.NewInvalid(schema.GroupKind{Group: coordinationv1.GroupName, Kind: "Lease"}, "x", field.ErrorList{field.Required(field.NewPath("spec"), "")}), true},
		{"403 Forbidden", apierrors.NewForbidden(lease, "x", errors.New("no")), true},
		{"401 Unauthorized", apierrors.NewUnauthorized("who"), true},
		{"400 BadRequest", apierrors.NewBadRequest("bad"), true},
		{"405 MethodNotAllowed", apierrors.NewMethodNotSupported(lease, "patch"), true},
		{"410 Gone", apierrors.NewGone("gone"), true},
		{"413 RequestEntityTooLarge", apierrors.NewRequestEntityTooLargeError("big"), true},
		{"415 UnsupportedMediaType", status(http.StatusUnsupportedMediaType), true},
		{"429 TooManyRequests", apierrors.NewTooManyRequests("busy", 1), true},
		{"a refusal wrapped", fmt.Errorf("kubestore: update: %w", apierrors.NewConflict(lease, "x", errors.New("changed"))), true},
		{"500 InternalError", apierrors.NewInternalError(errors.New("etcd")), false},
		{"500 ServerTimeout", apierrors.NewServerTimeout(lease, "update", 2), false},
		{"503 ServiceUnavailable", apierrors.NewServiceUnavailable("unavailable"), false},
		{"504 Timeout", apierrors.NewTimeoutError("request did not complete", 0), false},
		{"502 from a proxy", status(http.StatusBadGateway), false},
		{"a status with no code", status(0), false},
		{"a connection reset", lost, false},
		{"a context canceled", &url.Error{Op: "Put", URL: lost.URL, Err: context.Canceled}, false},
		{"a deadline exceeded", fmt.Errorf("update: %w", context.DeadlineExceeded), false},
		{"an error with no status", errors.New("the answer was lost"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := refused(tc.err); got != tc.want {
				t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
