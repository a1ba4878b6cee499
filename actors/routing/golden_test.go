package routing

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/route"
	"github.com/inferrail/inferrail/model/shadow"
)

// updateGolden rewrites testdata/golden-picks.txt from the code as it is.
var updateGolden = flag.Bool("update", false, "rewrite the golden decisions in testdata")

const goldenFile = "testdata/golden-picks.txt"

// seededAnswerer answers every Estimate with a prediction drawn from the
// query and its own count of questions, so that a seeded run gets the same
// replies whatever order the replica actors run in.
type seededAnswerer struct {
	salt  uint64
	asked uint64
}

func (a *seededAnswerer) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*replica.Estimate)
	if !ok {
		return
	}
	a.asked++
	q := m.Gather.Query()
	h := a.salt ^ uint64(q.PromptTokens)*0x9e3779b97f4a7c15 ^ a.asked
	if len(q.Blocks) > 0 {
		h ^= q.Blocks[0].Lo
	}
	cached := 0
	if h%3 != 0 {
		cached = int(h>>8) % (q.PromptTokens + 1) / 16 * 16
	}
	var r route.Reply
	r.CachedTokens = cached
	r.QueuedPrefill = time.Duration(h>>20%400) * time.Millisecond
	r.Waiting = int(h >> 40 % 5)
	r.Applied = a.asked / 2
	m.Gather.Fill(m.Slot, r)
}

// trialRecorder keeps the decisions offered to the shadows.
type trialRecorder struct{ got []*shadow.Decision }

func (s *trialRecorder) Offer(d *shadow.Decision) { s.got = append(s.got, d) }

// goldenScenario is one way a routing actor is set up.
type goldenScenario struct {
	name                string
	estimates, records  bool
	fanout              int
	shadows             bool
	logEvery, explainAt int // every logEvery-th Pick asks for the log, every explainAt-th step is an Explain; 0 never
}

func goldenScenarios(name string) []goldenScenario {
	aware := policy.CacheAware(name)
	return []goldenScenario{
		{name: "plain", estimates: aware},
		{name: "fanout3", estimates: aware, fanout: 3, logEvery: 5, explainAt: 7},
		{name: "shadows", estimates: aware, records: !aware, shadows: true, fanout: 4},
		{name: "broadcast", estimates: true, logEvery: 3, explainAt: 4},
	}
}

// goldenBlocks returns the blocks of a prompt of n tokens drawn from one of
// a few shared prefixes, so that recent owners and hot prefixes recur.
func goldenBlocks(rng *rand.Rand, n int) []prefix.Hash {
	ids := make([]uint32, n)
	base := uint32(rng.IntN(4)) << 20
	shared := rng.IntN(n + 1)
	for i := range ids {
		if i < shared {
			ids[i] = base + uint32(i)
		} else {
			ids[i] = rng.Uint32()
		}
	}
	var h prefix.Hasher
	return h.Chain(nil, prefix.Root("m", "", ""), ids, 16)
}

// runGolden drives one routing actor of policy name, set up as sc, over a
// seeded fleet and seeded requests, and writes every answer to out.
func runGolden(t *testing.T, sys *actor.ActorSystem, name string, sc goldenScenario, seed uint64, out *strings.Builder) {
	rng := rand.New(rand.NewPCG(seed, 77))
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	n := 2 + rng.IntN(9)
	fakes := make([]*fakeReplica, n)
	reps := make([]Replica, n)
	var answerers []*actor.PID
	for i := range fakes {
		models := []string{"m"}
		if rng.IntN(6) == 0 {
			models = []string{"other"}
		}
		f := newFake(fmt.Sprint("r", i), models, replica.NewCounters(rng.IntN(4), rng.IntN(3)))
		if rng.IntN(5) != 0 {
			f.set(func(s *replica.Snapshot) { s.Shadow = &replica.Shadow{} })
		}
		fakes[i] = f
		reps[i] = f
		if rng.IntN(4) != 0 {
			salt := rng.Uint64()
			pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &seededAnswerer{salt: salt} }))
			t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
			reps[i] = &estimating{fakeReplica: f, pid: pid}
			answerers = append(answerers, pid)
		}
	}
	p, err := policy.New(name)
	if err != nil {
		t.Fatal(err)
	}
	src := rand.NewPCG(seed, 1)
	var rec *trialRecorder
	cfg := Config{Model: "m", Policy: p, Rand: rand.New(src), Source: src, Now: clock, Estimates: sc.estimates,
		Records: sc.records, CostModel: cost.Default(), Fanout: sc.fanout, MaxAge: 250 * time.Millisecond}
	if sc.shadows {
		rec = &trialRecorder{}
		cfg.Trials = rec
	}
	pid := sys.Root.Spawn(Props(cfg))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	sys.Root.Send(pid, &ReplicasChanged{Replicas: reps})

	var leases []*replica.Lease
	for step := 1; step <= 60; step++ {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		for _, f := range fakes {
			if rng.IntN(4) != 0 {
				continue
			}
			healthy, ejected := rng.IntN(6) != 0, rng.IntN(6) == 0
			loadAge := time.Duration(rng.IntN(500)) * time.Millisecond
			running, kv := rng.IntN(8), rng.Float64()
			f.set(func(s *replica.Snapshot) {
				s.Healthy = healthy
				s.EjectedUntil = time.Time{}
				if ejected {
					s.EjectedUntil = now.Add(time.Second)
				}
				s.Load = load.Report{Running: float64(running), KVUsage: kv}
				s.LoadAt = now.Add(-loadAge)
			})
		}
		for len(leases) > 0 && rng.IntN(3) != 0 {
			k := rng.IntN(len(leases))
			if rng.IntN(2) == 0 {
				leases[k].FirstByte()
			} else {
				leases[k].Release()
				leases = append(leases[:k], leases[k+1:]...)
			}
		}
		var exclude []string
		for _, f := range fakes {
			if rng.IntN(8) == 0 {
				exclude = append(exclude, f.Snapshot().ID)
			}
		}
		req := policy.Request{Key: rng.Uint64N(8) + 1, BlockSize: 16}
		if rng.IntN(5) != 0 {
			req.PromptTokens = 16 + rng.IntN(2000)
			req.Blocks = goldenBlocks(rng, req.PromptTokens)
		}
		if rng.IntN(2) == 0 {
			req.SessionKey = req.Key
		}
		// An Explain waits for every estimate it asked for (nothing tells
		// it the deadline passed), so only a fleet whose every replica
		// answers gets one.
		if sc.explainAt > 0 && step%sc.explainAt == 0 && len(answerers) == n {
			m := &Explain{Request: req, Deadline: time.Now().Add(5 * time.Second), Answered: make(chan *Explanation, 1)}
			sys.Root.Send(pid, m)
			settle(t, sys, pid, answerers, nil)
			select {
			case ex := <-m.Answered:
				fmt.Fprintf(out, "%d explain %s\n", step, explained(ex))
			case <-time.After(5 * time.Second):
				t.Fatal("no explanation")
			}
			continue
		}
		m := &Pick{Request: req, Exclude: exclude, Log: sc.logEvery > 0 && step%sc.logEvery == 0}
		m.Deadline, m.Answered = time.Now().Add(5*time.Second), make(chan struct{}, 1)
		sys.Root.Send(pid, m)
		settle(t, sys, pid, answerers, m)
		select {
		case <-m.Answered:
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
		got := m.Answer()
		fmt.Fprintf(out, "%d pick %s\n", step, picked(got))
		if got.Lease != nil {
			leases = append(leases, got.Lease)
		}
	}
	for _, l := range leases {
		l.Release()
	}
	barrier(t, sys, pid)
	if rec != nil {
		for i, d := range rec.got {
			ids := make([]int, len(d.Cands))
			for k, c := range d.Cands {
				ids[k] = c.Replica
			}
			fmt.Fprintf(out, "shadow %d %s %v routed %d now %s cands %s\n", i, d.Policy, ids, d.Routed,
				d.Request.Now.Format(time.RFC3339Nano), goldenCands(d.Cands))
		}
	}
}

// goldenCands prints the candidates' fields as they were when the golden
// decisions were captured, in %+v's shape, so that a field added later
// (Labels, Waiting, PendingTokens for the scheduling plugins) does not
// change every line: what the plugins make of those fields is tested where
// they are filled.
func goldenCands(cs []policy.Candidate) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "{Replica:%d InFlight:%d Pending:%d Key:%d CachedTokens:%d QueuedPrefill:%v Running:%d KVUsage:%v Fresh:%t Session:%t}",
			c.Replica, c.InFlight, c.Pending, c.Key, c.CachedTokens, c.QueuedPrefill, c.Running, c.KVUsage, c.Fresh, c.Session)
	}
	b.WriteByte(']')
	return b.String()
}

// settle lets every estimate request the routing actor sent for its last
// message be answered, then tells it the estimate deadline has passed, as
// the fleet's asker does: the actor then decides on the same replies
// whichever order the actors ran in, those that never answer (a replica
// without an actor) priced from their published state.
func settle(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, answerers []*actor.PID, m *Pick) {
	t.Helper()
	barrier(t, sys, pid) // the requests are in the answerers' mailboxes
	for _, a := range answerers {
		barrier(t, sys, a)
	}
	if m != nil {
		sys.Root.Send(pid, &Gathered{Pick: m})
	}
}

// picked writes an answer, its prediction and its explanation.
func picked(p *Picked) string {
	if p.Err != nil {
		return p.Policy + " err " + p.Err.Error()
	}
	s := fmt.Sprintf("%s %s estimated=%t cached=%d est=%+v", p.Policy, p.Replica.ID, p.Estimated, p.CachedTokens, p.Estimate)
	if at := p.Attempt; at != nil {
		s += fmt.Sprintf(" attempt seq=%d prefill=%v blocks=%d price=%t", at.Seq, at.Prefill, len(at.Blocks), at.Price != nil)
		if at.Price != nil {
			s += fmt.Sprintf(" priced=%v", at.Price(at.PromptTokens/2))
		}
	}
	if p.Explanation != nil {
		// Hashed: the Explain lines show explanations in full.
		sum := sha256.Sum256([]byte(explained(p.Explanation)))
		s += " log " + hex.EncodeToString(sum[:8])
	}
	return s
}

func explained(ex *Explanation) string {
	errs := ""
	if ex.Err != nil {
		errs = ex.Err.Error()
	}
	return fmt.Sprintf("policy=%s winner=%q err=%q decision=%+v replicas=%+v", ex.Policy, ex.Winner, errs, ex.Decision, ex.Replicas)
}

// TestGoldenDecisions holds the routing actor to the decisions it made
// before the routing core moved to model/route: for every policy, set up
// every way the fleet sets it up (with and without the estimate broadcast,
// a shortlist, recorded decisions, shadows, the decision log and Explain),
// on seeded fleets whose health, ejection, room and load change between
// seeded requests, every answer, prediction, explanation and shadow
// decision is the one captured then (testdata/golden-picks.txt). Run with
// -update to capture them again, which only a change meant to alter
// decisions may do.
func TestGoldenDecisions(t *testing.T) {
	var b strings.Builder
	for _, name := range []string{"round_robin", "random", "least_request", "p2c", "prefix_hash", "kv_aware", "cost_model"} {
		for _, sc := range goldenScenarios(name) {
			for seed := uint64(1); seed <= 3; seed++ {
				sys := newSystem(t)
				fmt.Fprintf(&b, "== %s %s seed %d\n", name, sc.name, seed)
				runGolden(t, sys, name, sc, seed, &b)
			}
		}
	}
	got := b.String()
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gs, ws := bufio.NewScanner(strings.NewReader(got)), bufio.NewScanner(strings.NewReader(string(want)))
	gs.Buffer(nil, 1<<24)
	ws.Buffer(nil, 1<<24)
	section := ""
	for line := 1; ; line++ {
		g, w := gs.Scan(), ws.Scan()
		if !g && !w {
			break
		}
		if strings.HasPrefix(ws.Text(), "==") {
			section = ws.Text()
		}
		if gs.Text() != ws.Text() || g != w {
			t.Fatalf("line %d (%s) differs from the golden run:\n got %.400s\nwant %.400s", line, section, gs.Text(), ws.Text())
		}
	}
}
