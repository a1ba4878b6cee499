package decisionlog

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/model/cost"
)

func TestSampled(t *testing.T) {
	set := metrics.NewSet()
	dir := t.TempDir()
	for _, rate := range []float64{0, 0.01, 0.1, 0.5, 1} {
		w, err := Open(filepath.Join(dir, "d.jsonl"), rate, set)
		if err != nil {
			t.Fatal(err)
		}
		const n = 100_000
		kept := 0
		for i := range n {
			id := "req-" + strconv.Itoa(i)
			s := w.Sampled(id)
			if s != w.Sampled(id) {
				t.Fatalf("rate %v: %s sampled differently twice", rate, id)
			}
			if s {
				kept++
			}
		}
		// Five standard deviations of a binomial draw.
		got, sd := float64(kept)/n, 5*math.Sqrt(rate*(1-rate)/n)
		if got < rate-sd || got > rate+sd {
			t.Errorf("rate %v: sampled %v of ids", rate, got)
		}
		w.Close()
	}
	var none *Writer
	if none.Sampled("x") || none.Close() != nil {
		t.Fatal("a nil Writer samples or fails")
	}
	if _, err := Open(filepath.Join(dir, "d.jsonl"), 1.5, set); err == nil {
		t.Fatal("a sample rate of 1.5 was accepted")
	}
	if _, err := Open(filepath.Join(dir, "no", "such", "dir"), 1, set); err == nil {
		t.Fatal("a file in a missing directory was accepted")
	}
}

// Every record logged before Close is on disk after it, one JSON line each,
// from many goroutines at once; records logged after Close are counted as
// dropped.
func TestLogWritesEveryLine(t *testing.T) {
	set := metrics.NewSet()
	path := filepath.Join(t.TempDir(), "d.jsonl")
	w, err := Open(path, 1, set)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				n := i
				w.Log(&Record{RequestID: strconv.Itoa(g) + "-" + strconv.Itoa(i), Model: "m", Attempt: 1,
					PromptTokens: i, PredictedCachedTokens: &n, Decision: Decision{Policy: "cost_model"}})
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Log(&Record{RequestID: "late"})
	written := set.GetOrCreateCounter(`inferrail_decision_log_records_total{result="written"}`).Get()
	dropped := set.GetOrCreateCounter(`inferrail_decision_log_records_total{result="dropped"}`).Get()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d: %v: %s", lines+1, err, sc.Text())
		}
		if r.Time == "" || r.Policy != "cost_model" || r.PredictedCachedTokens == nil || *r.PredictedCachedTokens != r.PromptTokens {
			t.Fatalf("line %d read back as %+v", lines+1, r)
		}
		seen[r.RequestID] = true
		lines++
	}
	if lines != 3200 || len(seen) != 3200 || written+dropped != 3201 || dropped < 1 || int(written) != lines {
		t.Fatalf("%d lines (%d ids), %d written, %d dropped; want 3200 lines, written+dropped 3201", lines, len(seen), written, dropped)
	}
}

// BenchmarkRecord is what the front end adds to a sampled decision: the
// explanation's JSON shape, marshalled and queued (the disk is written by
// another goroutine).
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			w, err := Open(filepath.Join(b.TempDir(), "d.jsonl"), 1, metrics.NewSet())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			ex := &routing.Explanation{Policy: "cost_model", Winner: "r3"}
			for i := range n {
				ex.Replicas = append(ex.Replicas, routing.ReplicaExplained{ID: "r" + strconv.Itoa(i), Offered: true,
					InFlight: i, Running: i, KVUsage: 0.5, Fresh: true, Answered: true, CachedTokens: 16 * i,
					QueuedPrefill: time.Duration(i) * time.Millisecond,
					Estimate:      cost.Estimate{Queue: time.Millisecond, Prefill: 40 * time.Millisecond}})
			}
			cached, ttft := 4000, 0.041
			b.ReportAllocs()
			for i := range b.N {
				w.Log(&Record{RequestID: strconv.Itoa(i), Model: "m", Attempt: 1, PromptTokens: 8000, Blocks: 500,
					Tokenized: true, PredictedCachedTokens: &cached, EstimatedTTFT: &ttft, Decision: View(ex)})
			}
		})
	}
}
