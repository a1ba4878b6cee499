package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: Run
// starts none, and the tests join the ones that run configs side by side.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
