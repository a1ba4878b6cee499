package stress

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
)

// charTokenizer writes into dir a tokenizer.json that makes every printable
// ASCII character one token: a tokenizer that loads and predicts, and that
// counts a prompt nothing like the simulator does (a word a token).
func charTokenizer(dir string) error {
	vocab := map[string]int{}
	for c := ' '; c <= '~'; c++ {
		vocab[string(c)] = int(c - ' ')
	}
	doc, err := json.Marshal(map[string]any{"version": "1.0", "added_tokens": []any{},
		"normalizer": nil, "pre_tokenizer": nil, "post_processor": nil, "decoder": nil,
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}}})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tokenizer.json"), doc, 0o644)
}

// runTokenizer: a gateway whose tokenizer is not the engines' (issue 12,
// defect 3). It must still route on load, count every disagreement, and
// say why on /admin/replicas.
func runTokenizer(t *T) error {
	const replicas, rate = 2, 500.0
	n := pick(t, 2000, 400)
	dir, err := os.MkdirTemp("", "inferrail-stress-tokenizer-")
	if err != nil {
		return err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := charTokenizer(dir); err != nil {
		return err
	}
	sims, err := t.startSims(replicas, zeroLatency)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		c.Models[0].Tokenizer = dir
		c.Models[0].Policy = "cost_model"
	})
	if err != nil {
		return err
	}
	// The engines' capacity sizes the index: both report before the load.
	if _, err := gw.waitReplicas(t.ctx, 10*time.Second, func(rs []replicaView) bool {
		return len(rs) == replicas && rs[0].Engine != nil && rs[1].Engine != nil
	}); err != nil {
		return fmt.Errorf("waiting for the first engine reports: %w", err)
	}
	hc := t.client(gw.Addr, 256)
	// Half unary, half streamed with a usage chunk: both carry the
	// engine's count.
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("tokenizer", i, 2, i%2 == 0) })
	if err != nil {
		return err
	}
	failed, kinds := l.checkAll(nil)
	spread := l.spread()
	// The last answers' counts are recorded as their relays end.
	rs, err := gw.waitReplicas(t.ctx, 5*time.Second, func(rs []replicaView) bool {
		checked := 0
		for _, r := range rs {
			checked += int(r.PromptTokensChecked)
		}
		return checked == n
	})
	if err != nil {
		t.Failf("every answer's prompt count checked: %v", err)
	}
	mismatches, err := gw.metric("inferrail_prompt_tokens_mismatch_total")
	if err != nil {
		return err
	}
	t.Figf("%d requests at %.0f/s over %d replicas (served %v), %d errors; %.0f prompt counts disagreed with the engines'",
		n, rate, replicas, spread, failed, mismatches)
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	t.Checkf(len(spread) == replicas, "routing used %d of %d replicas: %v", len(spread), replicas, spread)
	t.Checkf(mismatches == float64(n), "inferrail_prompt_tokens_mismatch_total %.0f, want %d", mismatches, n)
	for _, r := range rs {
		codes := map[string]string{}
		var names []string
		for _, w := range r.Warnings {
			codes[w.Code] = w.Message
			names = append(names, w.Code)
		}
		agreement := -1.0
		if r.PromptTokensAgreement != nil {
			agreement = *r.PromptTokensAgreement
		}
		t.Figf("%s: %d checked, agreement %.2f, warnings %v", r.ID, r.PromptTokensChecked, agreement, names)
		t.Checkf(codes["tokenizer_mismatch"] != "", "%s: no tokenizer_mismatch warning on /admin/replicas: %v", r.ID, codes)
		t.Checkf(codes["capacity_units"] != "", "%s: its index is sized by the engine's capacity, and no capacity_units warning: %v", r.ID, codes)
		t.Checkf(r.PromptTokensAgreement != nil && agreement == 0, "%s: agreement %.2f, want 0", r.ID, agreement)
	}
	return nil
}
