package replica

import (
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/route"
)

// testGather stands in for the routing actor's gather (routing.Gather) in
// this package's tests: one slot per replica asked.
type testGather struct {
	query   estimate.Query
	replies []route.Reply
	got     []bool
}

// NewGather returns a gather for n replies to q. The tests read a reply
// only after a barrier on the actor that fills it.
func NewGather(q estimate.Query, n int) *testGather {
	return &testGather{query: q, replies: make([]route.Reply, n), got: make([]bool, n)}
}

func (g *testGather) Query() *estimate.Query { return &g.query }

func (g *testGather) Fill(i int, r route.Reply) { g.replies[i], g.got[i] = r, true }

// Reply returns slot i's reply and whether it has arrived.
func (g *testGather) Reply(i int) (route.Reply, bool) { return g.replies[i], g.got[i] }

var _ Gather = (*testGather)(nil)
