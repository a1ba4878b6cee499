package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/bench/agree"
	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// Two gateways in front of the same three simulators, the client
// alternating between them, against one gateway on three fresh simulators
// (issue 17's real-time run, issue 17's fleet: 400 blocks per engine, 12
// system prompts of about 1,550 tokens): with the engines' KV events every
// gateway follows every engine, so the pair keeps one gateway's hit rate
// and its predictions stay exact; without them, routing.cold_rendezvous
// makes the pair place each new prompt alike. Before each request both
// gateways explain it, and the test counts how often they would pick
// differently. Loopback only.
func TestTwoGatewaysAgree(t *testing.T) {
	type outcome struct {
		hit, exact, disagree float64
		n                    int
	}
	run := func(gateways int, events, rendezvous bool) outcome {
		format := ""
		if events {
			format = "vllm"
		}
		_, cfg := eventFleet(t, format, 400, 6000)
		// Without the rendezvous means without the automatic one too
		// (issue 32), which two gateways here would turn on.
		cfg.Routing.ColdRendezvous, cfg.Routing.SharedEnginesRendezvous = rendezvous, rendezvous
		var addrs, admins []string
		for range gateways {
			c := *cfg
			a, ad := startGateway(t, &c)
			addrs, admins = append(addrs, a), append(admins, ad)
		}
		client := &http.Client{Timeout: 30 * time.Second}
		rng := rand.New(rand.NewPCG(17, 17))
		systems := make([]string, 12)
		for i := range systems {
			var b strings.Builder
			for w := range 760 {
				fmt.Fprintf(&b, "s%dw%d ", i, w)
			}
			systems[i] = b.String()
		}
		const requests = 120
		var prompt, cached, exact, asked, disagreed int
		for k := range requests {
			msgs := []map[string]string{{"role": "system", "content": systems[rng.IntN(len(systems))]},
				{"role": "user", "content": fmt.Sprintf("question %d", k)}}
			if gateways > 1 {
				var picks []string
				for _, ad := range admins {
					picks = append(picks, explainWinner(t, client, ad, msgs))
				}
				asked++
				if picks[0] != picks[1] {
					disagreed++
				}
			}
			r, _, err := chatTurn(client, addrs[k%gateways], msgs, 4, false)
			if err != nil {
				t.Fatal(err)
			}
			if k < requests/4 {
				continue // the warm-up: every system prompt's first visits
			}
			prompt += r.prompt
			cached += r.cached
			if r.predicted == r.cached {
				exact++
			}
		}
		o := outcome{hit: float64(cached) / float64(prompt), exact: float64(exact) / float64(requests-requests/4), n: requests}
		if asked > 0 {
			o.disagree = float64(disagreed) / float64(asked)
		}
		return o
	}
	var disagree, lone [2]float64 // without events, without and with the rendezvous
	for _, c := range []struct{ events, rendezvous bool }{{true, false}, {false, false}, {false, true}} {
		one, two := run(1, c.events, c.rendezvous), run(2, c.events, c.rendezvous)
		t.Logf("KV events %v, cold rendezvous %v: one gateway hit %.3f exact %.3f; two gateways hit %.3f (%.3f×) exact %.3f, disagreement %.3f",
			c.events, c.rendezvous, one.hit, one.exact, two.hit, two.hit/one.hit, two.exact, two.disagree)
		// The targets (0.97× with events, 0.9× without) are
		// measured over more requests by the committed runs
		// (bench/results/instances-2026-12-01.md). Here the hit rate
		// depends on when events land relative to the next request, so
		// 90 requests on a busy box, -race included, are held to what
		// they keep there: 0.94-1.04× with events (0.943× in a CI
		// rehearsal beside other builds), and predictions exact.
		switch {
		case c.events:
			if two.hit < 0.9*one.hit || two.exact < 0.9 {
				t.Errorf("with events: two gateways' hit rate %.3f against one's %.3f, exact %.3f; want at least 0.9× and 0.9",
					two.hit, one.hit, two.exact)
			}
		case c.rendezvous:
			disagree[1], lone[1] = two.disagree, one.hit
			// 0.82-0.88× here (0.736-0.799 against 0.904 in rehearsals):
			// the engines hold four prefixes each, so most prefixes are
			// evicted ones, which go by each gateway's own estimate
			// (policy coldSeen), and 90 requests on a loaded box vary by
			// several percent. The bound only catches a collapse; what the
			// rendezvous is for, agreement, is held below, and the
			// issue's 0.9× by the committed matrix runs.
			if two.hit < 0.7*one.hit {
				t.Errorf("without events, with the rendezvous: two gateways' hit rate %.3f against one's %.3f; want at least 0.7×",
					two.hit, one.hit)
			}
		default:
			disagree[0], lone[0] = two.disagree, one.hit
		}
	}
	if disagree[1] >= disagree[0] {
		t.Errorf("without events: disagreement %.3f with the rendezvous, %.3f without; want it lower", disagree[1], disagree[0])
	}
	// The rendezvous must not cost a lone gateway: before evicted prefixes
	// went by the estimate, their owners (8, 3 and 1 of the 12 here, for
	// engines of 4) took them back and one gateway's hit rate fell from
	// 0.871 to 0.698 (0.80×). One real-time run of 90 measured requests
	// on a loaded machine varies by several percent each way (0.814
	// against 0.938, 0.868×, in one CI run), so this bound only catches
	// that collapse. bench/agree's TestRendezvousOnSmallEngines holds the
	// same fleet to 0.97× in virtual time, over eight seeds, but there
	// the collapse is milder (0.945 → 0.930 without the evicted-prefix
	// rule), so this bound stays the one that would see it.
	if lone[1] < 0.85*lone[0] {
		t.Errorf("without events: one gateway's hit rate %.3f with the rendezvous, %.3f without; want at least 0.85×", lone[1], lone[0])
	}
}

// explainWinner is the replica the gateway at admin would route msgs to.
func explainWinner(t *testing.T, client *http.Client, admin string, msgs []map[string]string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "sim", "max_tokens": 4, "messages": msgs})
	resp, err := client.Post("http://"+admin+"/admin/explain/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v struct {
		Winner *string `json:"winner"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Winner == nil {
		t.Fatalf("explain: %v %.300s", err, raw)
	}
	return *v.Winner
}

// A gateway that starts with index.warm_start_from naming a warm peer
// predicts as the peer does from its first request; one whose peer cannot
// be read says so on every replica and starts cold.
func TestWarmStart(t *testing.T) {
	sims, cfg := eventFleet(t, "vllm", 4096, 8192)
	peerCfg := *cfg
	peer, peerAdmin := startGateway(t, &peerCfg)
	client := &http.Client{Timeout: 30 * time.Second}
	conv := func(k int) []map[string]string {
		var b strings.Builder
		for w := range 300 {
			fmt.Fprintf(&b, "c%dw%d ", k, w)
		}
		return []map[string]string{{"role": "system", "content": b.String()}, {"role": "user", "content": "hello"}}
	}
	for k := range 12 {
		if _, _, err := chatTurn(client, peer, conv(k), 8, false); err != nil {
			t.Fatal(err)
		}
	}
	// The peer's index follows the engines' events; let the last batches in.
	caughtUp(t, client, peerAdmin, sims, cfg)

	// The new gateways follow the events live, without the engines' replay:
	// what the engines hold already only the peer's snapshot can tell.
	live := *cfg
	live.Replicas = append([]config.Replica(nil), cfg.Replicas...)
	for i := range live.Replicas {
		live.Replicas[i].KVEventsReplay = ""
	}
	warm := live
	warm.Index.WarmStartFrom = []string{"http://" + peerAdmin}
	// The third finds the peer by DNS, as behind a headless Service:
	// localhost names the peer's loopback address.
	_, peerPort, _ := net.SplitHostPort(peerAdmin)
	byDNS := live
	byDNS.Index.WarmStartDNS = "http://localhost:" + peerPort
	dnsAddr, _ := startGateway(t, &byDNS)
	cold := live
	cold.Index.WarmStartFrom = []string{"http://127.0.0.1:1"} // nothing listens there
	warmAddr, _ := startGateway(t, &warm)
	coldAddr, coldAdmin := startGateway(t, &cold)
	var warmExact, dnsExact, coldPredicted int
	for k := range 12 {
		msgs := conv(k)
		msgs[1]["content"] = "again"
		w, _, err := chatTurn(client, warmAddr, msgs, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		if w.predicted == w.cached && w.cached > 0 {
			warmExact++
		}
		d, _, err := chatTurn(client, dnsAddr, msgs, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.predicted == d.cached && d.cached > 0 {
			dnsExact++
		}
		c, _, err := chatTurn(client, coldAddr, conv(k+100), 4, false)
		if err != nil {
			t.Fatal(err)
		}
		coldPredicted += max(c.predicted, 0)
	}
	t.Logf("warm-started: %d of 12 first requests predicted exactly with a hit", warmExact)
	if warmExact < 11 {
		t.Errorf("warm-started gateway: %d of 12 predictions exact and above 0, want at least 11", warmExact)
	}
	if dnsExact < 11 {
		t.Errorf("gateway warm-started from index.warm_start_dns: %d of 12 predictions exact and above 0, want at least 11", dnsExact)
	}
	var view struct {
		Replicas []struct {
			ID       string            `json:"id"`
			Warnings []replica.Warning `json:"warnings"`
		} `json:"replicas"`
	}
	getJSON(t, client, "http://"+coldAdmin+"/admin/replicas", &view)
	for _, r := range view.Replicas {
		found := false
		for _, w := range r.Warnings {
			found = found || w.Code == replica.WarnWarmStart && strings.Contains(w.Message, "127.0.0.1:1")
		}
		if !found {
			t.Errorf("replica %s of the gateway whose peer is unreachable: warnings %+v, want %s naming the peer", r.ID, r.Warnings, replica.WarnWarmStart)
		}
	}
	resp, err := client.Get("http://" + coldAdmin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `inferrail_replica_warning{replica="sim-0",warning="index_warm_start_failed"} 1`; !strings.Contains(string(page), want) {
		t.Errorf("metrics: no %s", want)
	}
}

// One of two gateway processes killed with SIGKILL under an open-loop load
// (issue 17's first fault, shortened): the survivor fails nothing, the
// killed one fails no more than it had in flight and nothing sent after it
// died, and the survivor serves the rest. The gateways are this test
// binary run as inferrail (TestMain).
func TestKillOneInstance(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := agree.KillOptions{Rate: 100, Duration: 4 * time.Second, KillAt: 2 * time.Second, Events: true,
		// The simulators run in this race-instrumented process on two
		// shared cores: a health probe they answer late must not eject
		// them, which is not what the test is about.
		Edit:  func(c *config.Config) { c.Health.Timeout, c.Health.UnhealthyThreshold = time.Second, 10 },
		Start: selfGateway(self)}
	r, err := agree.Kill(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	agree.WriteKill(&b, o, r)
	t.Log("\n" + b.String())
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if r.InFlight == 0 && r.Failed[1] == 0 && r.FailedOver[1] == 0 {
		t.Fatal("the kill touched nothing: no request was in flight or retried")
	}
}

// A gateway warm-started from a peer whose engines' replay buffers no
// longer reach back to their first batch catches up from the snapshot's
// event sequence (index.warm_start_from, dump.Replica.Seq): its replicas
// turn exact at their first live batch, where one started cold with the
// same replay falls back (the replay cannot cover the gap) and stays
// approximate until a resync.
func TestWarmStartCatchesUp(t *testing.T) {
	sims, cfg := eventFleetWith(t, "vllm", 4096, 8192, func(o *sim.Options) {
		o.KVEventsConfig = `{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:0", ` +
			`"replay_endpoint": "tcp://127.0.0.1:0", "buffer_steps": 4}`
	})
	peerCfg := *cfg
	peer, peerAdmin := startGateway(t, &peerCfg)
	client := &http.Client{Timeout: 30 * time.Second}
	conv := func(k int, q string) []map[string]string {
		var b strings.Builder
		for w := range 300 {
			fmt.Fprintf(&b, "u%dw%d ", k, w)
		}
		return []map[string]string{{"role": "system", "content": b.String()}, {"role": "user", "content": q}}
	}
	for k := range 24 { // far more batches per engine than the 4 the replay keeps
		if _, _, err := chatTurn(client, peer, conv(k, "first"), 4, false); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, client, peerAdmin, sims, cfg) // the peer applies the last batches

	warm := *cfg
	warm.Index.WarmStartFrom = []string{"http://" + peerAdmin}
	cold := *cfg
	warmAddr, warmAdmin := startGateway(t, &warm)
	coldAddr, coldAdmin := startGateway(t, &cold)
	modes := func(admin string) map[string]string {
		var p struct {
			Replicas []struct {
				ID   string `json:"id"`
				Mode string `json:"index_mode"`
			} `json:"replicas"`
		}
		getJSON(t, client, "http://"+admin+"/admin/replicas", &p)
		out := map[string]string{}
		for _, r := range p.Replicas {
			out[r.ID] = r.Mode
		}
		return out
	}
	allExact := func(m map[string]string) bool {
		for _, v := range m {
			if v != string(replica.IndexExact) {
				return false
			}
		}
		return len(m) == 3
	}
	// New requests make every engine publish live batches, which start
	// both gateways' subscriptions catching up.
	var exact int
	for k := range 24 {
		w, _, err := chatTurn(client, warmAddr, conv(k, "again"), 4, false)
		if err != nil {
			t.Fatal(err)
		}
		if w.cached > 0 && w.predicted == w.cached {
			exact++
		}
		if _, _, err := chatTurn(client, coldAddr, conv(k+100, "again"), 4, false); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every replica of the warm-started gateway exact", 5*time.Second, func() bool { return allExact(modes(warmAdmin)) })
	t.Logf("warm-started: %d of 24 predicted exactly with a hit; modes %v; cold: %v", exact, modes(warmAdmin), modes(coldAdmin))
	if exact < 22 {
		t.Errorf("warm-started gateway: %d of 24 predictions exact with a hit, want at least 22", exact)
	}
	gaps := func(admin string) float64 {
		resp, err := client.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		n, _ := loadgen.PromSum(page, "inferrail_kv_events_gaps_total")
		return n
	}
	// The cold gateway's catch-up from batch 0 found the buffers short, and
	// resynced only from new prompts' blocks; the warm one lost nothing.
	if w, c := gaps(warmAdmin), gaps(coldAdmin); w != 0 || c == 0 {
		t.Errorf("KV event gaps: %v on the warm-started gateway (want 0), %v on the cold one (want some: else the replay "+
			"reached back to batch 0 and the test shows nothing)", w, c)
	}
}

// caughtUp waits until the gateway at admin has applied, for every replica
// of cfg, the last batch of KV events its simulator (sims, in the same
// order) published: GET /admin/index names each replica's last sequence.
func caughtUp(t *testing.T, client *http.Client, admin string, sims []*sim.Server, cfg *config.Config) {
	t.Helper()
	eventually(t, "the gateway at "+admin+" applies every engine's last batch", 10*time.Second, func() bool {
		var idx struct {
			Replicas []struct {
				ID     string `json:"id"`
				Events *struct {
					LastSeq *uint64 `json:"last_seq"`
				} `json:"events"`
			} `json:"replicas"`
		}
		getJSON(t, client, "http://"+admin+"/admin/index", &idx)
		got := map[string]*uint64{}
		for _, r := range idx.Replicas {
			if r.Events != nil {
				got[r.ID] = r.Events.LastSeq
			}
		}
		for i, s := range sims {
			want, ok := s.LastEventSeq()
			if seq := got[cfg.Replicas[i].ID]; ok && (seq == nil || *seq != want) {
				return false
			}
		}
		return true
	})
}

// The real-time matrix (inferrail bench instances --real), shortened: one
// and two gateway processes on three simulators, W1, with KV events and
// without. Every measured request is answered and counted, the control's
// ratio is 1 and the shared prompts hit the engines' caches. (How often two
// gateways disagree depends on when events land; under -race on a busy
// box it varies too much to bound here.)
func TestRealMatrix(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := agree.RealOptions{Points: []string{"W1"}, Instances: []int{1, 2}, Requests: 48, WarmUp: 12, Rate: 20, MaxTokens: 4, Seed: 1,
		Start: selfGateway(self)}
	rows, err := agree.Real(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	agree.WriteReal(&b, rows)
	t.Log("\n" + b.String())
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (events off and on × 1 and 2 gateways)", len(rows))
	}
	for _, r := range rows {
		if r.Requests != 36 || r.Failed != 0 || !(r.HitRate > 0) || r.P99TTFT <= 0 {
			t.Errorf("%+v: want 36 requests answered, none failed, a hit rate and a p99 TTFT", r)
		}
		if r.Instances == 1 && (r.Ratio != 1 || r.Disagreement != 0) {
			t.Errorf("%+v: the control's ratio must be 1 and its disagreement 0", r)
		}
	}
}

// selfGateway starts this test binary, at self, as a gateway process
// serving the config at path (TestMain runs it as inferrail).
func selfGateway(self string) func(ctx context.Context, path string) (*loadgen.Proc, error) {
	return func(ctx context.Context, path string) (*loadgen.Proc, error) {
		return loadgen.Start(ctx, loadgen.Command{Name: "gateway", Bin: self, Args: []string{"serve", "--config", path},
			Env: []string{asBinary + "=1"}})
	}
}
