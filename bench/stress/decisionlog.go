package stress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// runDecisionLog measures what the decision log at full sampling adds: two
// gateways routing with cost_model over the same three --zero-latency
// simulators, one logging every decision, take turns block by block at
// 5,000 req/s (short: 2,000, for the reason runLatency gives). Every
// decision must be on disk once the logging gateway stops, none dropped.
func runDecisionLog(t *T) error {
	// Ten blocks of 1,000 in the short version too: its bound is a median
	// over blocks of a p99, and five blocks let one noisy pair decide it.
	n := 10000
	rate := pick(t, 5000.0, 2000.0)
	sims, err := t.startSims(3, func(o *sim.Options) { o.Engine.Latency.Zero = true })
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "inferrail-stress-")
	if err != nil {
		return err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "decisions.jsonl")
	costModel := func(c *config.Config) {
		c.Routing.DefaultPolicy = "cost_model"
		c.Models[0].Tokenizer = "builtin:sim"
	}
	plain, err := t.startGateway(simURLs(sims), costModel)
	if err != nil {
		return err
	}
	logged, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		costModel(c)
		c.Observability.DecisionLog = config.DecisionLog{Path: path, SampleRate: 1}
	})
	if err != nil {
		return err
	}
	targets := [2]target{
		{"without the log", []*fasthttp.HostClient{t.client(plain.Addr, 256)}},
		{"with every decision logged", []*fasthttp.HostClient{t.client(logged.Addr, 256)}},
	}
	r, err := measureAdded(t, targets, rate, n, "decisionlog")
	if err != nil {
		return err
	}
	page, err := logged.get("/metrics")
	if err != nil {
		return fmt.Errorf("the logging gateway's /metrics: %w", err)
	}
	written, dropped := counter(page, `inferrail_decision_log_records_total{result="written"}`),
		counter(page, `inferrail_decision_log_records_total{result="dropped"}`)
	if err := logged.Stop(); err != nil { // writes what is queued and closes the file
		return fmt.Errorf("the logging gateway's shutdown: %w", err)
	}
	lines, bad, size, err := readLog(path)
	if err != nil {
		return err
	}
	t.Figf("%.0f/s (%d requests each way, sent at %.0f/s): without the log p50 %s p99 %s; with it p50 %s p99 %s; added (median of %d blocks of %d) p50 %s, p99 %s; %d decisions logged of %d requests (%.1f MB), %d dropped; errors %d, %d",
		rate, n, r.achieved, ms(r.base.P50S), ms(r.base.P99S), ms(r.test.P50S), ms(r.test.P99S),
		r.blocks, latencyBlock, dur(r.addedP50), dur(r.addedP99), lines, r.sent[1], float64(size)/1e6, dropped, r.errs[0], r.errs[1])
	r.check(t, targets, rate)
	t.Checkf(lines == r.sent[1] && bad == 0, "%d lines (%d malformed) for %d requests", lines, bad, r.sent[1])
	t.Checkf(dropped == 0, "%d decisions dropped (%d written by the time of the last scrape)", dropped, written)
	return nil
}

// counter reads one series' value from a metrics page; 0 when absent.
func counter(page []byte, series string) int {
	for line := range strings.SplitSeq(string(page), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// readLog counts a decision log's lines, and those that are not a JSON
// object naming the replica chosen.
func readLog(path string) (lines, bad int, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines++
		size += int64(len(sc.Bytes())) + 1
		var rec struct {
			Winner *string `json:"winner"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Winner == nil {
			bad++
		}
	}
	return lines, bad, size, sc.Err()
}
