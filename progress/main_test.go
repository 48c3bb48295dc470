package progress_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every Reporter a
// test starts must be closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
