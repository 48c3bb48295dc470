package kubestore

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// refused reports whether err, the error of a write to the API server, says for certain
// that the server did not apply the write: a status that the server sends for a request
// it refused before making any change, 400 Bad Request, 401 Unauthorized, 403 Forbidden,
// 404 Not Found, 405 Method Not Allowed, 406 Not Acceptable, 409 Conflict (a
// resourceVersion that no longer matches, or AlreadyExists), 410 Gone, 413 Request Entity
// Too Large, 415 Unsupported Media Type, 422 Invalid or 429 Too Many Requests.
//
// Any other error leaves the outcome unknown, and refused reports false: a transport
// error or a context that ended (the request may have reached the server, and the answer
// been lost), 500 Internal Server Error and 504 Gateway Timeout (the server may have
// written to etcd before it failed or timed out), 503 Service Unavailable (a proxy in
// front of the server may send it after the server took the request), and an error that
// carries no status. A write whose outcome is unknown may have been applied: what was
// made for it must not be cleaned up as if it had been refused; the store reads back to
// learn the outcome, or leaves the cleanup to a later sweep.
//
// client-go sends some writes again on its own (after a 429 or a 5xx status that carries
// Retry-After), so a refusal says only that the last attempt changed nothing: a 409 that
// follows an attempt with a lost answer may be the trace of that attempt. A caller that
// created or replaced an object of its own reads it back on a Conflict to tell.
func refused(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusConflict, http.StatusGone,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity,
		http.StatusTooManyRequests:
		return true
	}
	return false
}
