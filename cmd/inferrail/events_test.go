package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// TestKVEventsPredictionMatchesEngine runs multi-turn conversations that
// resend the assistant's answers, as bench's W2 does, through the gateway
// and three simulators, once with the gateway following the engines' KV
// events as vLLM publishes them, once as SGLang does (--kv-events-format
// sglang, engine_type sglang), and once without. Without them the index
// knows only the prompts it routed, not the blocks each engine filled while
// answering, so every later turn is predicted short. With them, in either
// encoding, the prediction (x-inferrail-cached-tokens) equals the engine's
// own count (usage.prompt_tokens_details.cached_tokens) on at least 97% of
// requests, and more often than without; every replica ends in exact mode.
func TestKVEventsPredictionMatchesEngine(t *testing.T) {
	off := conversationPredictions(t, "")
	runs := []struct {
		what string
		p    conversationStats
	}{{"decisions only", off}}
	for _, format := range []string{"vllm", "sglang"} {
		runs = append(runs, struct {
			what string
			p    conversationStats
		}{format + " events", conversationPredictions(t, format)})
	}
	for _, r := range runs {
		t.Logf("%-15s %d of %d predictions exact (%.1f%%); after the first turn %d of %d (%.1f%%); %d requests hit the cache",
			r.what, r.p.exact, r.p.n, r.p.rate(), r.p.laterExact, r.p.later, 100*float64(r.p.laterExact)/float64(max(r.p.later, 1)), r.p.hits)
	}
	for _, r := range runs[1:] {
		on := r.p
		if on.hits < on.n/2 {
			t.Errorf("with %s only %d of %d requests hit the cache: the test shows nothing", r.what, on.hits, on.n)
		}
		if on.rate() < 97 {
			t.Errorf("with %s %.1f%% of predictions exact, want at least 97%%", r.what, on.rate())
		}
		if on.exact <= off.exact {
			t.Errorf("%s did not make predictions better: %d exact with them, %d without", r.what, on.exact, off.exact)
		}
	}
}

type conversationStats struct {
	n, exact, later, laterExact, hits int
}

func (s conversationStats) rate() float64 { return 100 * float64(s.exact) / float64(max(s.n, 1)) }

// conversationPredictions runs the conversations through a fresh gateway
// and fleet, with KV events in format (vllm or sglang) or without them
// (""), and counts exact predictions.
func conversationPredictions(t *testing.T, format string) conversationStats {
	t.Helper()
	events := format != ""
	_, cfg := eventFleet(t, format, 2048, 4096)
	replicas := cfg.Replicas
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, admin := startGateway(t, cfg)

	// Twelve conversations of six turns, four at a time. Each starts with
	// a system prompt of its own (10-25 blocks) and asks for answers of
	// 20-60 tokens, one to three blocks the engine fills while decoding.
	const convs, turns, workers = 12, 6, 4
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	var st conversationStats
	jobs := make(chan int)
	errs := make(chan error, convs)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range jobs {
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				var sys strings.Builder
				for w := range 150 + rng.IntN(250) {
					fmt.Fprintf(&sys, "c%dw%d ", c, w)
				}
				msgs := []map[string]string{{"role": "system", "content": sys.String()}}
				for turn := range turns {
					msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("turn %d of conversation %d: go on", turn, c)})
					stream := (c+turn)%2 == 1
					r, answer, err := chatTurn(client, addr, msgs, 20+rng.IntN(40), stream)
					if err != nil {
						errs <- fmt.Errorf("conversation %d turn %d: %w", c, turn, err)
						return
					}
					msgs = append(msgs, map[string]string{"role": "assistant", "content": answer})
					// The user reads the answer before writing again; the
					// engine's events about it travel meanwhile.
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					st.n++
					if r.predicted == r.cached {
						st.exact++
					} else if events {
						t.Logf("with KV events: conversation %d turn %d (%s): predicted %d, engine cached %d of %d",
							c, turn, r.replica, r.predicted, r.cached, r.prompt)
					}
					if turn > 0 {
						st.later++
						if r.predicted == r.cached {
							st.laterExact++
						}
					}
					if r.cached > 0 {
						st.hits++
					}
					mu.Unlock()
				}
			}
		})
	}
	for c := range convs {
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The simulators' events fit the gateway's configuration (block size,
	// builtin:sim's vocabulary): no replica may warn about them.
	resp, err := client.Get("http://" + admin + "/admin/replicas")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var view struct {
		Replicas []struct {
			ID       string            `json:"id"`
			Warnings []json.RawMessage `json:"warnings"`
			Mode     string            `json:"index_mode"`
		} `json:"replicas"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || len(view.Replicas) != len(replicas) {
		t.Fatalf("/admin/replicas: %v, %d replicas", err, len(view.Replicas))
	}
	for _, r := range view.Replicas {
		if len(r.Warnings) != 0 {
			t.Errorf("replica %s warns: %s", r.ID, r.Warnings)
		}
		if want := map[bool]string{true: "exact", false: "approximate"}[events]; r.Mode != want {
			t.Errorf("replica %s: index_mode %s, want %s", r.ID, r.Mode, want)
		}
	}
	return st
}

// eventFleet starts three fast simulators of blocks KV blocks and contexts
// of maxLen tokens, publishing their KV events in format (vllm or sglang;
// "" for none), and returns them with a cost_model config in front of them:
// the model as sim with builtin:sim's tokenizer, each replica sized to its
// engine's cache and subscribed to its events. The caller may change the
// config before it validates and serves it.
func eventFleet(t *testing.T, format string, blocks, maxLen int) ([]*sim.Server, *config.Config) {
	t.Helper()
	return eventFleetWith(t, format, blocks, maxLen, nil)
}

// eventFleetWith is eventFleet with the simulators' options edited by edit
// when set.
func eventFleetWith(t *testing.T, format string, blocks, maxLen int, edit func(*sim.Options)) ([]*sim.Server, *config.Config) {
	t.Helper()
	opts := sim.DefaultOptions()
	if format != "" {
		opts.KVEventsFormat = format
	}
	opts.Port = 0
	opts.EnablePromptTokensDetails = true
	opts.Engine.NumBlocks = blocks
	opts.Engine.MaxModelLen = maxLen
	opts.Engine.Latency.PrefillToken = 10 * time.Microsecond
	opts.Engine.Latency.PrefillFixed = time.Millisecond
	opts.Engine.Latency.DecodeToken = time.Millisecond
	if edit != nil {
		edit(&opts)
	}
	sims, replicas, err := startSims(3, opts, format != "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	cfg := config.Default()
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Routing.DefaultPolicy = "cost_model"
	cfg.Routing.Seed = 1
	// A replica that misses the estimate deadline is priced without its
	// index; a -race run on two busy cores should measure the index, not
	// the deadline.
	cfg.Routing.EstimateDeadline = 100 * time.Millisecond
	m := config.NewModel(opts.Model, "sim")
	m.Tokenizer, m.BlockSize = tokenize.Sim, opts.Engine.BlockSize
	cfg.Models = []config.Model{m}
	for i := range replicas {
		replicas[i].KVCapacityBlocks = opts.Engine.NumBlocks
	}
	cfg.Replicas = replicas
	return sims, cfg
}

// chatTurn sends one chat request and returns the gateway's prediction,
// the engine's usage and the answer's text.
func chatTurn(client *http.Client, addr string, msgs []map[string]string, maxTokens int, stream bool) (predictedUsage, string, error) {
	req := map[string]any{"model": "sim", "max_tokens": maxTokens, "messages": msgs}
	if stream {
		req["stream"] = true
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	body, _ := json.Marshal(req)
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return predictedUsage{}, "", err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return predictedUsage{}, "", fmt.Errorf("%v %d %.200s", err, resp.StatusCode, raw)
	}
	r := predictedUsage{predicted: -1, replica: resp.Header.Get("X-Inferrail-Replica")}
	if h := resp.Header.Get("X-Inferrail-Cached-Tokens"); h != "" {
		r.predicted, _ = strconv.Atoi(h)
	}
	if r.prompt, r.cached, err = usageOf(stream, raw); err != nil {
		return predictedUsage{}, "", err
	}
	answer, err := answerOf(stream, raw)
	return r, answer, err
}

// answerOf returns the assistant's text from a whole or streamed chat
// response.
func answerOf(stream bool, body []byte) (string, error) {
	type choice struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	}
	var r struct {
		Choices []choice `json:"choices"`
	}
	if !stream {
		if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) == 0 {
			return "", fmt.Errorf("no answer in %.200q: %v", body, err)
		}
		return r.Choices[0].Message.Content, nil
	}
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		r.Choices = nil
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return "", err
		}
		for _, c := range r.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String(), nil
}

// An engine restarted under a gateway that follows its KV events (issue
// 17's second fault): the gateway sees the restart (the new engine's event
// sequence starts again, its counters go backwards), empties that
// replica's index, counts the restart on /admin/replicas, and predicts
// exactly again from the new engine's events: no cache for the prompt the
// old engine held, then what the new one stores.
func TestEngineRestartResetsIndex(t *testing.T) {
	sims, cfg := eventFleet(t, "vllm", 4096, 8192)
	addr, admin := startGateway(t, cfg)
	client := &http.Client{Timeout: 30 * time.Second}
	var b strings.Builder
	for w := range 400 {
		fmt.Fprintf(&b, "restart%d ", w)
	}
	msgs := []map[string]string{{"role": "system", "content": b.String()}, {"role": "user", "content": "first"}}
	first, _, err := chatTurn(client, addr, msgs, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	msgs[1]["content"] = "second"
	warm, _, err := chatTurn(client, addr, msgs, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if warm.replica != first.replica || warm.cached == 0 || warm.predicted != warm.cached {
		t.Fatalf("before the restart: %+v after %+v, want the same replica, a hit, predicted exactly", warm, first)
	}
	k := slices.IndexFunc(cfg.Replicas, func(r config.Replica) bool { return r.ID == warm.replica })
	// engine reads the replica's engine as the gateway last scraped it:
	// its prefix-cache queries and the restarts counted.
	engine := func() (queries float64, restarts int) {
		var p struct {
			Replicas []struct {
				ID     string `json:"id"`
				Engine *struct {
					Queries  float64 `json:"prefix_cache_queries"`
					Restarts int     `json:"engine_restarts"`
				} `json:"engine"`
			} `json:"replicas"`
		}
		getJSON(t, client, "http://"+admin+"/admin/replicas", &p)
		for _, r := range p.Replicas {
			if r.ID == warm.replica && r.Engine == nil {
				return 0, 0 // not scraped yet
			}
			if r.ID == warm.replica {
				return r.Engine.Queries, r.Engine.Restarts
			}
		}
		t.Fatalf("%s not on /admin/replicas", warm.replica)
		return 0, 0
	}
	restarts := func() int { _, n := engine(); return n }
	if n := restarts(); n != 0 {
		t.Fatalf("%d engine restarts before any", n)
	}
	// The counters that go backwards must have been scraped once: a restart
	// between two scrapes with no request in between shows only at the
	// new engine's first KV event (load.Restarted).
	eventually(t, "a scrape of the served requests", 10*time.Second, func() bool { q, _ := engine(); return q > 0 })
	sims[k].Kill()
	if err := sims[k].Restart(); err != nil {
		t.Fatal(err)
	}
	if pub, _ := sims[k].EventEndpoints(); pub != cfg.Replicas[k].KVEvents {
		t.Fatalf("the restarted engine publishes on %s, not %s", pub, cfg.Replicas[k].KVEvents)
	}
	eventually(t, "the restart counted on /admin/replicas", 10*time.Second, func() bool { return restarts() >= 1 })

	// Only the restarted engine is asked from here on, so that each
	// prediction is for it.
	for i := range cfg.Replicas {
		if i != k {
			sims[i].SetFault(sim.Fault{Kind: sim.FaultFail, Status: http.StatusServiceUnavailable})
		}
	}
	msgs[1]["content"] = "third"
	cold, _, err := chatTurn(client, addr, msgs, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if cold.replica != warm.replica || cold.cached != 0 || cold.predicted != 0 {
		t.Fatalf("after the restart: %+v, want %s with no cache, predicted none", cold, warm.replica)
	}
	msgs[1]["content"] = "fourth"
	var again predictedUsage
	eventually(t, "an exact hit on the new engine", 5*time.Second, func() bool {
		again, _, err = chatTurn(client, addr, msgs, 4, false)
		return err == nil && again.cached > 0 && again.predicted == again.cached
	})
	if n := restarts(); n != 1 {
		t.Errorf("one restart counted %d times", n)
	}
}
