package whatif

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: Sweep
// joins every goroutine it starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
