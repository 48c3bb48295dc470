package kubestore

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// notApplied reports whether err, the error of a write, says for certain that the API
// server did not apply the write: a status that the server sends only for a request it
// refused (400 Bad Request, 401, 403 Forbidden, 404 Not Found, 405, 406, 409 Conflict or
// AlreadyExists, 413 Request Entity Too Large, 415, 422 Invalid, 429 Too Many Requests).
// Any other error leaves the outcome unknown: a transport error, a context that ended, a
// body that could not be read, 500 or 504 (the server, or a proxy before it, may have
// applied the write before it failed to answer). Only a write that was not applied may
// be cleaned up after as if it had never been sent.
func notApplied(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusConflict,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
		http.StatusUnprocessableEntity, http.StatusTooManyRequests:
		return true
	}
	return false
}
