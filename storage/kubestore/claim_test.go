package kubestore_test

import (
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/storetest"
)

// TestClaims runs the checks of claim sessions on the API server.
func TestClaims(t *testing.T) {
	storetest.RunClaims(t, func(t *testing.T) operations.Store {
		return newStore(t, nil)
	})
}
