package fleet

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
)

// splitFleet routes model m over 4 replicas with a 75/25 split between
// cost_model and round_robin.
func splitFleet(t *testing.T) *Fleet {
	t.Helper()
	return start(t, testConfig(4, func(c *config.Config) {
		c.Models[0].Split = map[string]int{"cost_model": 75, "round_robin": 25}
		c.Routing.EstimateDeadline = time.Second
	}), Options{})
}

// Each conversation stays with the arm its key falls in, each arm routes
// with its own policy and state, and both share the replicas' shadow
// indexes.
func TestSplitArms(t *testing.T) {
	f := splitFleet(t)
	if !f.UsesEstimates("m") || !f.UsesEstimates("sim") {
		t.Fatal("a split with a cache-aware arm does not use estimates")
	}
	if a := f.Arms("sim"); len(a) != 2 || a[0] != (policy.Arm{Policy: "cost_model", Percent: 75}) || a[1] != (policy.Arm{Policy: "round_robin", Percent: 25}) {
		t.Fatalf("arms %v", a)
	}
	split, err := policy.NewSplit(map[string]int{"cost_model": 75, "round_robin": 25})
	if err != nil {
		t.Fatal(err)
	}
	const convs, turns = 40, 6
	arm := make(map[int]string)    // conversation → policy of its first decision
	perArm := make(map[string]int) // decisions per policy
	var rr []string                // round_robin's replicas, in decision order
	for turn := range turns {
		for c := range convs {
			req := promptReq(uint32(c)*10000, 512+16*turn) // a growing conversation
			req.Key = policy.Key(fmt.Sprint("conversation-", c))
			req.SessionKey = req.Key
			d := pickOK(t, f, req)
			want := split.Arms()[split.Arm(req.Key)].Policy
			if d.Policy != want {
				t.Fatalf("conversation %d turn %d: policy %s, want %s", c, turn, d.Policy, want)
			}
			if turn == 0 {
				arm[c] = d.Policy
			} else if arm[c] != d.Policy {
				t.Fatalf("conversation %d moved from %s to %s", c, arm[c], d.Policy)
			}
			perArm[d.Policy]++
			switch d.Policy {
			case "cost_model":
				if !d.Predicted {
					t.Fatalf("cost_model decision not priced: %+v", d)
				}
			case "round_robin":
				if d.Predicted {
					t.Fatalf("round_robin decision priced (it skips the broadcast): %+v", d)
				}
				rr = append(rr, d.Replica)
			}
			f.FirstByte(d)
			f.Done(d, OutcomeOK)
		}
	}
	conv := map[string]int{}
	for _, p := range arm {
		conv[p]++
	}
	t.Logf("conversations per arm %v, decisions per arm %v", conv, perArm)
	if conv["cost_model"] == 0 || conv["round_robin"] == 0 {
		t.Fatalf("an arm got no conversation: %v", conv)
	}
	// round_robin's rotation runs on its own, whatever cost_model decided
	// between its turns.
	for i := 1; i < len(rr); i++ {
		var prev, cur int
		fmt.Sscanf(rr[i-1], "r%d", &prev)
		fmt.Sscanf(rr[i], "r%d", &cur)
		if cur != (prev+1)%4 {
			t.Fatalf("round_robin went %s then %s: its rotation was disturbed (%v)", rr[i-1], rr[i], rr)
		}
	}
}

// The cache-aware arms of a split share the replicas' shadow indexes: a
// prompt one arm routed is predicted cached by the other.
func TestSplitArmsShareIndexes(t *testing.T) {
	f := start(t, testConfig(3, func(c *config.Config) {
		c.Models[0].Split = map[string]int{"cost_model": 50, "kv_aware": 50}
		c.Routing.EstimateDeadline = time.Second
	}), Options{})
	split, _ := policy.NewSplit(map[string]int{"cost_model": 50, "kv_aware": 50})
	key := map[string]uint64{} // a request key in each arm
	for i := uint64(1); len(key) < 2; i++ {
		key[split.Arms()[split.Arm(i)].Policy] = i
	}
	req := promptReq(4242, 2000)
	req.Key = key["kv_aware"]
	d1 := pickOK(t, f, req)
	if d1.Policy != "kv_aware" {
		t.Fatalf("policy %s", d1.Policy)
	}
	f.FirstByte(d1)
	f.Done(d1, OutcomeOK)
	waitFor(t, "the assignment applied", func() bool {
		s, _ := f.Snapshot(d1.Replica)
		b, _, _ := s.Shadow.Index()
		return b == 2000/16
	})
	req.Key = key["cost_model"]
	d2 := pickOK(t, f, req)
	if d2.Policy != "cost_model" || d2.Replica != d1.Replica || d2.CachedTokens != 1984 {
		t.Fatalf("cost_model sent kv_aware's prompt to %s with %d cached; want %s with 1984", d2.Replica, d2.CachedTokens, d1.Replica)
	}
	f.Done(d2, OutcomeOK)
}

// Over many request keys each arm gets its percent of the decisions, and
// the decision log names the arm.
func TestSplitShares(t *testing.T) {
	f := splitFleet(t)
	const n = 2000
	count := map[string]int{}
	for i := range n {
		req := policy.Request{Key: policy.Key(fmt.Sprint("request-", i))}
		d, err := f.Pick(PickRequest{Model: "m", Policy: req, Deadline: time.Now().Add(5 * time.Second), Log: i%10 == 0})
		if err != nil {
			t.Fatal(err)
		}
		if d.Explanation != nil && d.Explanation.Policy != d.Policy {
			t.Fatalf("decision of %s explained as %s's", d.Policy, d.Explanation.Policy)
		}
		if (i%10 == 0) != (d.Explanation != nil) {
			t.Fatalf("decision %d: explanation %v", i, d.Explanation)
		}
		count[d.Policy]++
		f.Done(d, OutcomeOK)
	}
	share := float64(count["cost_model"]) / n
	t.Logf("cost_model %.1f%%, round_robin %.1f%% of %d requests", 100*share, 100-100*share, n)
	// 5 standard deviations of a 75% share over 2000 keys: 4.8 points.
	if share < 0.75-0.049 || share > 0.75+0.049 {
		t.Fatalf("cost_model got %.1f%%, want 75%%", 100*share)
	}
}

// Explain explains the request's arm, or the arm it names.
func TestSplitExplain(t *testing.T) {
	f := splitFleet(t)
	split, _ := policy.NewSplit(map[string]int{"cost_model": 75, "round_robin": 25})
	deadline := time.Now().Add(5 * time.Second)
	for i := range 20 {
		req := promptReq(uint32(i)*1000, 600)
		req.Key = policy.Key(fmt.Sprint("s", i))
		ex, err := f.Explain("m", "", req, deadline)
		if err != nil {
			t.Fatal(err)
		}
		if want := split.Arms()[split.Arm(req.Key)].Policy; ex.Policy != want {
			t.Fatalf("key %d explained by %s, want %s", i, ex.Policy, want)
		}
		for _, p := range []string{"cost_model", "round_robin"} {
			if ex, err := f.Explain("sim", p, req, deadline); err != nil || ex.Policy != p {
				t.Fatalf("explain %s: %v %+v", p, err, ex)
			}
		}
	}
	if _, err := f.Explain("m", "p2c", policy.Request{}, deadline); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("explain p2c: %v, want ErrUnknownPolicy", err)
	}
}

// A split of 100 to one policy routes exactly as that policy does.
func TestSplitOfOneIsThePolicy(t *testing.T) {
	plain := start(t, testConfig(5, func(c *config.Config) { c.Models[0].Policy = "p2c" }), Options{})
	split := start(t, testConfig(5, func(c *config.Config) { c.Models[0].Split = map[string]int{"p2c": 100} }), Options{})
	if a := split.Arms("m"); len(a) != 1 || a[0] != (policy.Arm{Policy: "p2c", Percent: 100}) {
		t.Fatalf("arms %v", a)
	}
	var held [][2]Decision
	for i := range 200 {
		req := PickRequest{Model: "m", Policy: policy.Request{Key: uint64(i)}, Deadline: time.Now().Add(5 * time.Second)}
		a, err := plain.Pick(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := split.Pick(req)
		if err != nil {
			t.Fatal(err)
		}
		if a.Replica != b.Replica || a.Policy != b.Policy {
			t.Fatalf("decision %d: %s by %s, split of one: %s by %s", i, a.Replica, a.Policy, b.Replica, b.Policy)
		}
		// Hold some, so that load tells the replicas apart.
		if i%3 == 0 {
			held = append(held, [2]Decision{a, b})
			continue
		}
		plain.Done(a, OutcomeOK)
		split.Done(b, OutcomeOK)
	}
	for _, d := range held {
		plain.Done(d[0], OutcomeOK)
		split.Done(d[1], OutcomeOK)
	}
}

// A cache-blind arm of a split with a cache-aware one records its
// decisions in the shared shadow state: the prompt round_robin routed is
// predicted cached for cost_model, and its prefill sits on that replica's
// queue until its first byte, priced from the replica's own prediction. The
// cache-blind decision itself predicts nothing.
func TestSplitBlindArmRecords(t *testing.T) {
	f := start(t, testConfig(3, func(c *config.Config) {
		c.Models[0].Split = map[string]int{"cost_model": 50, "round_robin": 50}
		c.Routing.EstimateDeadline = time.Second
	}), Options{})
	split, _ := policy.NewSplit(map[string]int{"cost_model": 50, "round_robin": 50})
	key := map[string]uint64{}
	for i := uint64(1); len(key) < 2; i++ {
		key[split.Arms()[split.Arm(i)].Policy] = i
	}
	req := promptReq(777, 2000)
	req.Key = key["round_robin"]
	d1 := pickOK(t, f, req)
	if d1.Policy != "round_robin" || d1.Predicted {
		t.Fatalf("round_robin's decision: policy %s, predicted %v", d1.Policy, d1.Predicted)
	}
	waitFor(t, "the blind arm's attempt recorded and queued", func() bool {
		s, _ := f.Snapshot(d1.Replica)
		b, _, _ := s.Shadow.Index()
		return b == 2000/16 && s.Shadow.Queued(time.Now()) > 0
	})
	f.FirstByte(d1)
	f.Done(d1, OutcomeOK)
	waitFor(t, "its queue drained at the first byte", func() bool {
		s, _ := f.Snapshot(d1.Replica)
		return s.Shadow.Queued(time.Now()) == 0
	})
	req.Key = key["cost_model"]
	d2 := pickOK(t, f, req)
	if d2.Policy != "cost_model" || d2.Replica != d1.Replica || d2.CachedTokens != 1984 {
		t.Fatalf("cost_model sent round_robin's prompt to %s with %d cached; want %s with 1984", d2.Replica, d2.CachedTokens, d1.Replica)
	}
	f.Done(d2, OutcomeOK)

	// A model routed by round_robin alone records nothing.
	rr := start(t, testConfig(3, func(c *config.Config) { c.Models[0].Policy = "round_robin" }), Options{})
	d := pickOK(t, rr, promptReq(777, 2000))
	rr.Done(d, OutcomeOK)
	if d.attempt != nil {
		t.Fatal("a round_robin-only model sent its replica an attempt to record")
	}
	if s, _ := rr.Snapshot(d.Replica); s.Shadow != nil {
		if b, _, _ := s.Shadow.Index(); b != 0 {
			t.Fatalf("a round_robin-only model recorded %d blocks", b)
		}
	}
}
