package frontend

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// usageEngine is an engine that answers every request with before, the
// usage chunk when the body asks for it, and after, written in random
// pieces, each flushed (so the gateway reads it cut at random places), and
// keeps the bodies it was sent.
type usageEngine struct {
	before, after string
	sim           http.Handler // answers everything but completions
	mu            sync.Mutex
	bodies        []string
	rng           *rand.Rand
}

func (e *usageEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		e.sim.ServeHTTP(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.bodies = append(e.bodies, string(b))
	stream := e.before + e.after
	if strings.Contains(string(b), `"include_usage":true`) {
		stream = e.before + usageChunk + e.after
	}
	cuts := []int{}
	for i := 0; i < len(stream); {
		i += 1 + e.rng.IntN(90)
		cuts = append(cuts, min(i, len(stream)))
	}
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	from := 0
	for _, c := range cuts {
		io.WriteString(w, stream[from:c])
		w.(http.Flusher).Flush()
		from = c
		time.Sleep(200 * time.Microsecond)
	}
}

func (e *usageEngine) body(i int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bodies[i]
}

// usageChunk is a vLLM final usage chunk with cached tokens; the stream's
// other events are the engine's content and [DONE].
const usageChunk = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[]," +
	"\"usage\":{\"prompt_tokens\":9,\"total_tokens\":12,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"

func contentStream() (before, after string) {
	var b strings.Builder
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n")
	for i := range 30 {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d \\u00e9\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
	}
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n")
	return b.String(), "data: [DONE]\n\n"
}

// TestInjectUsage: with observability.usage_for_accuracy: inject, a
// streamed request whose client asked for no usage goes to the engine with
// stream_options.include_usage added and nothing else changed, and the
// client gets the engine's stream, cut at random places, byte for byte but
// for the usage chunk, while the gateway reads its cached tokens: the bytes
// as_sent gives it, where request and stream are left alone and the
// prediction is unknown. A client that asked for usage gets it.
func TestInjectUsage(t *testing.T) {
	before, after := contentStream()
	full := before + usageChunk + after
	for _, mode := range []string{config.UsageInject, config.UsageAsSent} {
		t.Run(mode, func(t *testing.T) {
			_, urls := startSims(t, 1, nil)
			u, _ := url.Parse(urls[0])
			eng := &usageEngine{before: before, after: after, rng: rand.New(rand.NewPCG(1, 2)), sim: httputil.NewSingleHostReverseProxy(u)}
			srv := httptest.NewServer(eng)
			t.Cleanup(srv.Close)
			g := startOpts(t, []string{srv.URL}, func(c *config.Config) {
				c.Observability.UsageForAccuracy, c.Routing.DefaultPolicy = mode, "cost_model"
			},
				func(o *Options) { o.Tokenizer = simTokenizer{} })
			waitFor(t, "engine capacity read", 2*time.Second, func() bool { return !snapshot(t, g, "r0").LoadAt.IsZero() })
			plain := `{"model":"` + model + `","messages":[{"role":"user","content":"inject me, a prompt long enough to fill a few blocks of sixteen tokens each, twice over: inject me, a prompt long enough to fill a few blocks"}],"max_tokens":3,"stream":true}`
			const runs = 20
			for i := range runs {
				resp, got := g.post("/v1/chat/completions", plain)
				if resp.StatusCode != 200 || resp.Header.Get(HeaderCachedTokens) == "" {
					t.Fatalf("run %d: %d, predicted %q", i, resp.StatusCode, resp.Header.Get(HeaderCachedTokens))
				}
				want, sent := before+after, `{"model":"`+model+`","messages":[{"role":"user","content":"inject me, a prompt long enough to fill a few blocks of sixteen tokens each, twice over: inject me, a prompt long enough to fill a few blocks"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`
				if mode == config.UsageAsSent {
					sent = plain
				}
				if got != want {
					t.Fatalf("run %d: the client got\n%q\nwant\n%q", i, got, want)
				}
				if b := eng.body(i); b != sent {
					t.Fatalf("run %d: the engine got %s, want %s", i, b, sent)
				}
			}
			asked := chat("inject me, a prompt long enough to fill a few blocks of sixteen tokens each, twice over: inject me, a prompt long enough to fill a few blocks", 3, true)
			if _, got := g.post("/v1/chat/completions", asked); got != full {
				t.Fatalf("a client that asked for usage got\n%q", got)
			}
			if b := eng.body(runs); b != strings.Replace(asked, `"sim"`, `"`+model+`"`, 1) {
				t.Fatalf("the engine got %s, want %s", b, asked)
			}
			l := `inferrail_prediction_total{model="` + model + `",replica="r0",result=`
			compared, unknown := float64(runs+1), 0.0
			if mode == config.UsageAsSent {
				compared, unknown = 1, runs
			}
			// The engine always reports 0 cached tokens, so all but the
			// first (cold) prediction are over.
			waitFor(t, "every prediction compared", 2*time.Second, func() bool {
				return counter(g, l+`"exact"}`)+counter(g, l+`"over"}`) == compared && counter(g, l+`"unknown"}`) == unknown
			})
		})
	}
}

// TestPredictionAccuracy: over simulators that report cached tokens, every
// prediction the gateway priced and sent back (x-inferrail-cached-tokens)
// gets one result, and the counts agree with the client's own comparison
// of that header with the usage each response carried, by replica; the
// delivered counter sums the engines' cached tokens; /admin/replicas'
// numbers come from the same counts (telemetry.Registry.Accuracy).
func TestPredictionAccuracy(t *testing.T) {
	sims, urls := startSims(t, 3, func(o *sim.Options) { o.EnablePromptTokensDetails = true })
	g := startOpts(t, urls, func(c *config.Config) { c.Routing.DefaultPolicy = "cost_model" },
		func(o *Options) { o.Tokenizer = simTokenizer{} })
	g.sims = sims
	for _, id := range []string{"r0", "r1", "r2"} {
		waitFor(t, "engine capacity read", 2*time.Second, func() bool { return !snapshot(t, g, id).LoadAt.IsZero() })
	}
	type key struct{ replica, result string }
	want := map[key]int{}
	delivered := 0
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		// A few shared prefixes, so that many predictions hit.
		content := strings.Repeat("shared system prompt number "+strconv.Itoa(i%3)+" ", 20) + "question " + strconv.Itoa(rng.IntN(5))
		stream := i%2 == 0
		resp, body := g.post("/v1/chat/completions", chat(content, 2, stream))
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		h := resp.Header.Get(HeaderCachedTokens)
		if h == "" {
			continue
		}
		predicted, _ := strconv.Atoi(h)
		cached := usageCached(t, body, stream)
		delivered += cached
		want[key{resp.Header.Get(HeaderReplica), telemetry.Result(predicted, cached)}]++
	}
	if len(want) == 0 {
		t.Fatal("no request was predicted")
	}
	for i := range 3 {
		id := "r" + strconv.Itoa(i)
		for _, res := range telemetry.PredictionResults {
			series := `inferrail_prediction_total{model="` + model + `",replica="` + id + `",result="` + res + `"}`
			w := want[key{id, res}]
			waitFor(t, series, 2*time.Second, func() bool { return counter(g, series) == float64(w) })
		}
		a := g.fe.met.Accuracy(id)
		if int(a.Exact) != want[key{id, telemetry.PredictionExact}] || a.Unknown != 0 {
			t.Errorf("%s: accuracy %+v, want %v exact", id, a, want[key{id, telemetry.PredictionExact}])
		}
	}
	if got := counter(g, `inferrail_delivered_cached_tokens_total{model="`+model+`"}`); got != float64(delivered) {
		t.Errorf("delivered %v, the responses carried %d", got, delivered)
	}
	t.Logf("results by replica: %v", want)
}

// usageCached reads the cached tokens of a response's usage, as a client
// would: the body's, or the final usage chunk's.
func usageCached(t *testing.T, body string, stream bool) int {
	t.Helper()
	var u struct {
		Usage *struct {
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if stream {
		for _, l := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"usage"`) {
				body = d
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil || u.Usage == nil || u.Usage.Details == nil {
		t.Fatalf("no cached tokens in %q: %v", body, err)
	}
	return u.Usage.Details.Cached
}

// TestNoCachedTokensWarning: an engine whose usage never carries
// prompt_tokens_details (vLLM without --enable-prompt-tokens-details)
// leaves every prediction unknown, and after noDetailsMin responses the
// replica says so, once, naming the flag; a usage with them clears it.
func TestNoCachedTokensWarning(t *testing.T) {
	sims, urls := startSims(t, 1, func(o *sim.Options) { o.EnablePromptTokensDetails = false })
	g := startOpts(t, urls, func(c *config.Config) { c.Routing.DefaultPolicy = "cost_model" },
		func(o *Options) { o.Tokenizer = simTokenizer{} })
	g.sims = sims
	waitFor(t, "engine capacity read", 2*time.Second, func() bool { return !snapshot(t, g, "r0").LoadAt.IsZero() })
	long := strings.Repeat("a prompt of a few blocks to predict ", 8)
	for i := range noDetailsMin {
		if snapshot(t, g, "r0").Warnings.Active(replica.WarnNoCachedTokens) {
			t.Fatalf("raised after %d responses", i)
		}
		if resp, body := g.post("/v1/chat/completions", chat(long+strconv.Itoa(i), 2, i%2 == 1)); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	w := warning(snapshot(t, g, "r0"), replica.WarnNoCachedTokens)
	if !strings.Contains(w.Message, "--enable-prompt-tokens-details") {
		t.Fatalf("warning %+v; all: %+v", w, snapshot(t, g, "r0").Warnings.List())
	}
	if got := counter(g, `inferrail_prediction_total{model="`+model+`",replica="r0",result="unknown"}`); got != noDetailsMin {
		t.Fatalf("%v unknown predictions", got)
	}
	series := g.fe.met.Replica("r0", model, "cost_model")
	Account(g.fl, g.fe.log, g.fe.met.Model(model), series, fleet.Decision{Replica: "r0", Predicted: true}, 64,
		openai.Usage{PromptTokens: 64, Details: true}, true)
	if snapshot(t, g, "r0").Warnings.Active(replica.WarnNoCachedTokens) {
		t.Fatal("a usage with cached tokens did not clear the warning")
	}
}
