package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKVEventsFallbackAndBack withholds every engine's KV events for three
// seconds under conversation traffic, as a partition between the engines
// and the gateway would (the engines keep numbering and buffering their
// batches). Each replica falls back to the approximate index once no batch
// has come for kv_events.max_silence after its engine completed requests
// that stored blocks, counts it, and is exact again once the events resume:
// the first live batch shows the gap, the replay fills it, and predictions
// equal the engines' own cached_tokens again. With vLLM's events and with
// SGLang's (whose replay has no topic frame). How long the return takes is
// logged.
func TestKVEventsFallbackAndBack(t *testing.T) {
	for _, format := range []string{"vllm", "sglang"} {
		t.Run(format, func(t *testing.T) { fallbackAndBack(t, format) })
	}
}

func fallbackAndBack(t *testing.T, format string) {
	sims, cfg := eventFleet(t, format, 4096, 8192)
	cfg.KVEvents.MaxSilence = time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, admin := startGateway(t, cfg)
	client := &http.Client{Timeout: 30 * time.Second}

	// Conversations, three at a time, until stop: each turn resends the
	// answers so far, so a prediction is exact only if the index knows the
	// blocks the engine filled while answering.
	type result struct {
		at    time.Time // when it was sent, and so routed and predicted
		exact bool
	}
	var (
		mu      sync.Mutex
		results []result
		stop    atomic.Bool
		wg      sync.WaitGroup
		failed  atomic.Value
		convSeq atomic.Int64
	)
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				c := convSeq.Add(1)
				rng := rand.New(rand.NewPCG(uint64(c), 11))
				var sys strings.Builder
				for w := range 100 + rng.IntN(100) {
					fmt.Fprintf(&sys, "%s-c%dw%d ", format, c, w)
				}
				msgs := []map[string]string{{"role": "system", "content": sys.String()}}
				for turn := 0; turn < 8 && !stop.Load(); turn++ {
					msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("turn %d: go on", turn)})
					sent := time.Now()
					r, answer, err := chatTurn(client, addr, msgs, 20+rng.IntN(30), turn%2 == 1)
					if err != nil {
						failed.Store(err)
						return
					}
					msgs = append(msgs, map[string]string{"role": "assistant", "content": answer})
					mu.Lock()
					results = append(results, result{sent, r.predicted == r.cached})
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
		if err, ok := failed.Load().(error); ok {
			t.Fatal(err)
		}
	}()

	modes := func() []string {
		var view struct {
			Replicas []struct {
				Mode string `json:"index_mode"`
			} `json:"replicas"`
		}
		getJSON(t, client, "http://"+admin+"/admin/replicas", &view)
		var out []string
		for _, r := range view.Replicas {
			out = append(out, r.Mode)
		}
		return out
	}
	all := func(mode string) func() bool {
		return func() bool {
			ms := modes()
			for _, m := range ms {
				if m != mode {
					return false
				}
			}
			return len(ms) == len(sims)
		}
	}
	eventually(t, "every replica exact", 10*time.Second, all("exact"))
	time.Sleep(time.Second) // some traffic in exact mode

	withheld := time.Now()
	for _, s := range sims {
		if !s.WithholdEvents(true) {
			t.Fatal("the simulator publishes no events")
		}
	}
	eventually(t, "every replica fell back", 10*time.Second, all("approximate"))
	fellBack := time.Since(withheld)
	time.Sleep(3*time.Second - fellBack)
	resumed := time.Now()
	for _, s := range sims {
		s.WithholdEvents(false)
	}
	eventually(t, "every replica exact again", 10*time.Second, all("exact"))
	exactAt := time.Now()
	exactAgain := exactAt.Sub(resumed)
	time.Sleep(2 * time.Second) // traffic after the return

	// Counted, by reason, and the return as a resync.
	var idx struct {
		Replicas []struct {
			ID     string `json:"id"`
			Events struct {
				LastSeq   *uint64           `json:"last_seq"`
				Fallbacks map[string]uint64 `json:"fallbacks"`
				Resyncs   uint64            `json:"resyncs"`
			} `json:"events"`
		} `json:"replicas"`
	}
	getJSON(t, client, "http://"+admin+"/admin/index", &idx)
	for _, r := range idx.Replicas {
		if r.Events.Fallbacks["silence"] < 1 || r.Events.Resyncs < 1 || r.Events.LastSeq == nil {
			t.Errorf("replica %s: fallbacks %v, resyncs %d, last seq %v", r.ID, r.Events.Fallbacks, r.Events.Resyncs, r.Events.LastSeq)
		}
	}
	stop.Store(true)
	wg.Wait()

	// Predictions: before the withholding, while withheld, and once every
	// replica is exact again.
	mu.Lock()
	defer mu.Unlock()
	var before, during, after [2]int // exact, all
	lastMiss := time.Duration(-1)
	for _, r := range results {
		if !r.exact && !r.at.Before(resumed) {
			lastMiss = max(lastMiss, r.at.Sub(resumed))
		}
		var c *[2]int
		switch {
		case r.at.Before(withheld):
			c = &before
		case r.at.Before(resumed):
			c = &during
		case !r.at.Before(exactAt):
			c = &after
		default:
			continue // between the resumption and the last replica's return
		}
		c[1]++
		if r.exact {
			c[0]++
		}
	}
	t.Logf("%s: fell back %v after the events stopped (max_silence 1s); exact again %v after they resumed; "+
		"last inexact prediction %v after resumption", format, fellBack.Round(time.Millisecond),
		exactAgain.Round(time.Millisecond), lastMiss.Round(time.Millisecond))
	t.Logf("%s: exact predictions before %d/%d, while withheld %d/%d, once exact again %d/%d", format,
		before[0], before[1], during[0], during[1], after[0], after[1])
	if before[1] < 10 || after[1] < 10 {
		t.Fatalf("too little traffic: %d requests before, %d after", before[1], after[1])
	}
	if 100*before[0] < 97*before[1] || 100*after[0] < 97*after[1] {
		t.Errorf("predictions exact before %d/%d, once exact again %d/%d: want at least 97%% of each", before[0], before[1], after[0], after[1])
	}
	if during[0] == during[1] {
		t.Errorf("every prediction was exact while the events were withheld (%d): the test shows nothing", during[1])
	}
}

// getJSON decodes the JSON at url into v.
func getJSON(t *testing.T, client *http.Client, url string, v any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// eventually polls cond every 10 ms until it holds, failing the test after
// within.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
