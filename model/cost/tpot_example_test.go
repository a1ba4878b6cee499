package cost_test

import (
	"fmt"

	"github.com/inferrail/inferrail/model/cost"
)

// A replica decodes 40 streams and 2 requests wait for their first token.
// A new request placed there decodes with all 42, once its own prefill is
// done; each of the 40 running streams waits for the new prompt's prefill
// (4000 tokens, 1000 of them cached), which over its next 32 tokens raises
// its time per output token by Harm/32.
func ExampleModel_TPOT() {
	m := cost.Default()
	fmt.Println("new request:", m.TPOT(40+2, 0, 1))
	harm := m.Harm(4000, 1000, 32)
	fmt.Println("each running stream, over 32 tokens:", harm, "more, or", harm/32, "per token")
	// Output:
	// new request: 24.2ms
	// each running stream, over 32 tokens: 332.949999ms more, or 10.404687ms per token
}
