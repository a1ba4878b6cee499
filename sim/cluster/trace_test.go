package cluster

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/inferrail/inferrail/sim/workload"
)

// mooncakeSlice is the first 300 requests of Mooncake's conversation
// trace, kept with the workload package's tests.
const mooncakeSlice = "../workload/testdata/mooncake_first300.jsonl"

// blockOracle is the share of a Mooncake trace's prompt tokens that an
// unlimited cache could serve, counted at the trace's own granularity as
// its README counts it: each prompt's leading ids already seen, 512 tokens
// each (the last block may be partial). Ids chain (an id always follows
// the same one), so an id seen means its whole prefix was seen.
func blockOracle(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[int64]bool{}
	var hit, total int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			InputLength int     `json:"input_length"`
			HashIDs     []int64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		k := 0
		for k < len(l.HashIDs) && seen[l.HashIDs[k]] {
			k++
		}
		hit += min(512*k, l.InputLength)
		total += l.InputLength
		for _, id := range l.HashIDs {
			seen[id] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return float64(hit) / float64(total)
}

// traceConfig replays tr once at its own rate on 4 replicas with
// cost_model, on engines that hold its longest prompt (120,633 tokens).
func traceConfig(tr *workload.Trace) Config {
	eng := defaultEngine()
	eng.MaxModelLen = 128 << 10
	eng.NumBlocks = eng.MaxModelLen / eng.BlockSize
	return Config{Replicas: 4, Engine: eng, Policy: "cost_model", Workload: tr, Rate: tr.Rate(), Requests: tr.Len()}
}

// Replayed through the fleet, a trace's prompts share exactly the blocks
// their hash ids share: the run's oracle finds the hit rate the trace's
// ids give. The engines' blocks are 16 tokens and the oracle stops one
// token short of a whole prompt, so the two differ by a little.
func TestTraceOracle(t *testing.T) {
	tr, err := workload.LoadTrace(mooncakeSlice, workload.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, traceConfig(tr))
	if len(res.Requests) != tr.Len() {
		t.Fatalf("%d records of %d requests", len(res.Requests), tr.Len())
	}
	var oracle, prompt int
	for i, r := range res.Requests {
		if r.PromptTokens != tr.Records()[i].InputLength || r.Arrival != tr.Records()[i].At {
			t.Fatalf("request %d: %d tokens at %v, the trace's %+v", i, r.PromptTokens, r.Arrival, tr.Records()[i])
		}
		oracle += r.OracleTokens
		prompt += r.PromptTokens
	}
	got, want := float64(oracle)/float64(prompt), blockOracle(t, mooncakeSlice)
	t.Logf("oracle %.5f, the trace's ids %.5f", got, want)
	if want < 0.05 || math.Abs(got-want) > 0.005 {
		t.Fatalf("oracle hit rate %.4f, the trace's ids give %.4f", got, want)
	}
}

// BenchmarkTraceReplay is one run of the trace's first 300 requests
// (12,000 prompt tokens on average) as TestTraceOracle makes it.
func BenchmarkTraceReplay(b *testing.B) {
	tr, err := workload.LoadTrace(mooncakeSlice, workload.TraceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := traceConfig(tr)
	for b.Loop() {
		mustRun(b, cfg)
	}
}
