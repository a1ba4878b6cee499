package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/model/openai"
)

// TTFTMetric is vLLM's time to first token histogram (vllm/v1/metrics/loggers.py).
const TTFTMetric = "vllm:time_to_first_token_seconds"

// Defaults of Options' zero fields.
const (
	DefaultRequestTimeout = 5 * time.Minute
	DefaultSettleTimeout  = 30 * time.Second
	DefaultPoll           = 10 * time.Millisecond
)

const (
	maxBodyBytes = 16 << 20 // a metrics page or a model list
	warmupTokens = 64
)

// ErrNotIdle means something besides the calibration used the engine: its
// counters moved by more than the calibration's own requests.
var ErrNotIdle = errors.New("engine not idle")

// Options configure a Run.
type Options struct {
	// URL is the engine's base URL, such as http://10.0.0.10:8000.
	URL string
	// Model is the model name sent with each request; "" takes the first
	// model GET /v1/models lists.
	Model string
	// Seed draws the prompts' words. A seed already run against the same
	// engine finds its prompts cached.
	Seed uint64
	// Probes are sent in order; see cost.Plan.
	Probes []cost.Probe
	// RequestTimeout bounds each completion (default 5m).
	RequestTimeout time.Duration
	// SettleTimeout bounds each wait for the engine to be idle with every
	// request counted (default 30s).
	SettleTimeout time.Duration
	// Poll is the wait between scrapes while settling (default 10ms).
	Poll time.Duration
	// Progress, when set, is called after each probe with its index.
	Progress func(i int, m Measurement)
}

// Measurement is one probe as the engine reported it. It is a plain value.
type Measurement struct {
	// Probe is the probe as planned.
	Probe cost.Probe
	// PromptTokens is the probe's usage.prompt_tokens.
	PromptTokens int
	// Cached is how many of them the engine found in its prefix cache
	// (the change of vllm:prefix_cache_hits; 0 with prefix caching off).
	Cached int
	// TTFT is the probe's time to first token as the engine timed it: the
	// change of vllm:time_to_first_token_seconds_sum. With max_tokens 1 on
	// an idle engine that is its prefill.
	TTFT time.Duration
	// HTTP is the time from sending the request to reading the whole
	// response, as the client saw it.
	HTTP time.Duration
}

// Computed is how many tokens the engine computed: the prompt less the
// cached tokens.
func (m Measurement) Computed() int { return m.PromptTokens - m.Cached }

// Sample is m as the fit takes it.
func (m Measurement) Sample() cost.Sample {
	return cost.Sample{Computed: m.Computed(), Cached: m.Cached, Secs: m.TTFT.Seconds()}
}

// Result is what a Run measured. It is a plain value.
type Result struct {
	// Model is the model name the requests carried.
	Model string
	// Probes holds one Measurement per probe, in the order sent.
	Probes []Measurement
}

// Samples returns the probes as the fit takes them.
func (r Result) Samples() []cost.Sample {
	out := make([]cost.Sample, len(r.Probes))
	for i, m := range r.Probes {
		out[i] = m.Sample()
	}
	return out
}

// Run warms the engine up with one untimed request, then sends the probes
// one at a time and returns their measurements. It stops at the first
// error, returning what it measured before it, or when ctx ends (after the
// request in flight, if any).
func Run(ctx context.Context, opts Options) (Result, error) {
	c, err := newClient(opts)
	if err != nil {
		return Result{}, err
	}
	defer c.hc.CloseIdleConnections()
	if c.model == "" {
		if c.model, err = c.firstModel(ctx); err != nil {
			return Result{}, err
		}
	}
	res := Result{Model: c.model, Probes: make([]Measurement, 0, len(opts.Probes))}
	w := words{rng: rand.New(rand.NewPCG(opts.Seed, 0x63616c6962726174)), ratio: 1}

	st, err := c.settle(ctx, 0)
	if err != nil {
		return res, err
	}
	if st, err = c.untimed(ctx, st, w.text(warmupTokens), &w); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	for i, p := range opts.Probes {
		var m Measurement
		if m, st, err = c.probe(ctx, st, p, &w); err != nil {
			return res, fmt.Errorf("probe %d (c=%d u=%d): %w", i, p.Cached, p.Compute, err)
		}
		res.Probes = append(res.Probes, m)
		if opts.Progress != nil {
			opts.Progress(i, m)
		}
	}
	return res, nil
}

// client talks to one engine.
type client struct {
	hc             *fasthttp.HostClient
	base           string // URL without a trailing slash
	model          string
	requestTimeout time.Duration
	settleTimeout  time.Duration
	poll           time.Duration
}

func newClient(opts Options) (*client, error) {
	u, err := url.Parse(opts.URL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("url %q: %w", opts.URL, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("url %q: want http or https with a host", opts.URL)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	c := &client{
		hc: &fasthttp.HostClient{
			Addr:                addr,
			IsTLS:               u.Scheme == "https",
			Name:                "inferrail-calibrate",
			MaxConns:            2,
			MaxResponseBodySize: maxBodyBytes,
		},
		base:           strings.TrimRight(opts.URL, "/"),
		model:          opts.Model,
		requestTimeout: opts.RequestTimeout,
		settleTimeout:  opts.SettleTimeout,
		poll:           opts.Poll,
	}
	if c.requestTimeout <= 0 {
		c.requestTimeout = DefaultRequestTimeout
	}
	if c.settleTimeout <= 0 {
		c.settleTimeout = DefaultSettleTimeout
	}
	if c.poll <= 0 {
		c.poll = DefaultPoll
	}
	return c, nil
}

// do sends req and fills resp within timeout and ctx, and checks for a 200.
func (c *client) do(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.hc.DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s: %w", req.Header.Method(), req.URI(), err)
	}
	if sc := resp.StatusCode(); sc != fasthttp.StatusOK {
		return &StatusError{Request: string(req.Header.Method()) + " " + req.URI().String(), Status: sc,
			Body: string(resp.Body()[:min(len(resp.Body()), 512)])}
	}
	return nil
}

// StatusError is an engine's answer other than 200 OK.
type StatusError struct {
	Request string // method and URL
	Status  int
	Body    string // its first 512 bytes
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.Request, e.Status, e.Body)
}

// get fetches base+path and returns a copy of its body.
func (c *client) get(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(fasthttp.MethodGet)
	if err := c.do(ctx, req, resp, timeout); err != nil {
		return nil, err
	}
	return append([]byte(nil), resp.Body()...), nil
}

// firstModel returns the first model the engine lists.
func (c *client) firstModel(ctx context.Context) (string, error) {
	body, err := c.get(ctx, "/v1/models", c.settleTimeout)
	if err != nil {
		return "", err
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("GET /v1/models: %w", err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", errors.New("GET /v1/models: no model listed")
	}
	return list.Data[0].ID, nil
}

// complete sends prompt for one token and returns its usage.prompt_tokens
// and the time the request took.
func (c *client) complete(ctx context.Context, prompt string) (int, time.Duration, error) {
	body, err := json.Marshal(struct {
		Model       string  `json:"model"`
		Prompt      string  `json:"prompt"`
		MaxTokens   int     `json:"max_tokens"`
		Temperature float64 `json:"temperature"`
	}{c.model, prompt, 1, 0})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	n, err := c.promptTokens(ctx, "/v1/completions", body)
	return n, time.Since(start), err
}

// promptTokens posts body to path and returns the response's
// usage.prompt_tokens.
func (c *client) promptTokens(ctx context.Context, path string, body []byte) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	if err := c.do(ctx, req, resp, c.requestTimeout); err != nil {
		return 0, err
	}
	u, ok := openai.FindUsage(resp.Body())
	if !ok || u.PromptTokens < 1 {
		return 0, fmt.Errorf("POST %s: no usage.prompt_tokens in the response", path)
	}
	return u.PromptTokens, nil
}

// state is what one metrics page showed.
type state struct {
	load load.Report
	ttft load.Hist
}

func (s state) idle() bool { return s.load.Running == 0 && s.load.Waiting == 0 }

// scrape reads the engine's metrics page.
func (c *client) scrape(ctx context.Context) (state, error) {
	page, err := c.get(ctx, "/metrics", c.settleTimeout)
	if err != nil {
		return state{}, err
	}
	r, err := load.Parse(page)
	if err != nil {
		return state{}, fmt.Errorf("GET /metrics: %w", err)
	}
	if r.Engine != load.EngineVLLM {
		return state{}, fmt.Errorf("GET /metrics: a %s engine; calibrate reads vLLM's metrics", r.Engine)
	}
	h, err := load.Histogram(page, TTFTMetric)
	if err != nil {
		return state{}, fmt.Errorf("GET /metrics: %w", err)
	}
	return state{load: r, ttft: h}, nil
}

// settle scrapes until the engine is idle and its TTFT histogram has
// counted at least count requests, and returns that page's state. vLLM
// updates its metrics as it hands outputs on, not necessarily before the
// response is written.
func (c *client) settle(ctx context.Context, count float64) (state, error) {
	deadline := time.Now().Add(c.settleTimeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return state{}, ctx.Err()
		case <-timer.C:
		}
		s, err := c.scrape(ctx)
		if err != nil {
			return state{}, err
		}
		if s.idle() && s.ttft.Count >= count {
			return s, nil
		}
		if time.Now().After(deadline) {
			return state{}, fmt.Errorf("%w after %v: %g running, %g waiting, %g of %g requests counted in %s",
				ErrNotIdle, c.settleTimeout, s.load.Running, s.load.Waiting, s.ttft.Count, count, TTFTMetric)
		}
		timer.Reset(c.poll)
	}
}

// untimed sends prompt, waits until the engine has counted it, and returns
// the state after it.
func (c *client) untimed(ctx context.Context, before state, prompt string, w *words) (state, error) {
	n, _, err := c.complete(ctx, prompt)
	if err != nil {
		return state{}, err
	}
	w.learn(prompt, n)
	return c.settle(ctx, before.ttft.Count+1)
}

// probe sends p's cached part alone, then the probe, and measures it.
func (c *client) probe(ctx context.Context, st state, p cost.Probe, w *words) (Measurement, state, error) {
	m := Measurement{Probe: p}
	var prefix string
	if p.Cached > 0 {
		prefix = w.text(p.Cached)
		var err error
		if st, err = c.untimed(ctx, st, prefix, w); err != nil {
			return m, st, fmt.Errorf("cached part: %w", err)
		}
	}
	prompt := prefix + w.text(p.Compute)
	n, took, err := c.complete(ctx, prompt)
	if err != nil {
		return m, st, err
	}
	w.learn(prompt, n)
	after, err := c.settle(ctx, st.ttft.Count+1)
	if err != nil {
		return m, st, err
	}
	queries := after.load.PrefixQueries - st.load.PrefixQueries
	hits := after.load.PrefixHits - st.load.PrefixHits
	switch {
	case after.ttft.Count != st.ttft.Count+1:
		return m, after, fmt.Errorf("%w: %g requests counted in %s during the probe, want 1",
			ErrNotIdle, after.ttft.Count-st.ttft.Count, TTFTMetric)
	case queries != 0 && queries != float64(n):
		// vLLM counts each new request's whole prompt as queried tokens;
		// 0 means prefix caching is off.
		return m, after, fmt.Errorf("%w: vllm:prefix_cache_queries grew by %g for a prompt of %d tokens",
			ErrNotIdle, queries, n)
	case hits < 0 || hits >= float64(n):
		return m, after, fmt.Errorf("vllm:prefix_cache_hits grew by %g for a prompt of %d tokens", hits, n)
	}
	secs := after.ttft.Sum - st.ttft.Sum
	if !(secs > 0) {
		return m, after, fmt.Errorf("%s_sum grew by %g s", TTFTMetric, secs)
	}
	m.PromptTokens, m.Cached, m.HTTP = n, int(hits), took
	m.TTFT = time.Duration(math.Round(secs * 1e9))
	return m, after, nil
}

// words draws prompts of random three-letter words, each followed by a
// space: one token each in the simulator's tokenizer (model/token.Sim ends a
// token after a space). ratio is the tokens per word the engine has
// reported so far, so that a real tokenizer's prompts come near the planned
// sizes.
type words struct {
	rng          *rand.Rand
	ratio        float64
	tokens, sent int
}

// text returns about tokens tokens of fresh words.
func (w *words) text(tokens int) string {
	n := max(1, int(math.Round(float64(tokens)/w.ratio)))
	var sb strings.Builder
	sb.Grow(4 * n)
	for range n {
		x := w.rng.Uint32()
		sb.WriteByte('a' + byte(x%26))
		sb.WriteByte('a' + byte(x/26%26))
		sb.WriteByte('a' + byte(x/676%26))
		sb.WriteByte(' ')
	}
	return sb.String()
}

// learn notes that prompt (words of text) was tokens tokens long.
func (w *words) learn(prompt string, tokens int) {
	w.sent += len(prompt) / 4
	w.tokens += tokens
	w.ratio = float64(w.tokens) / float64(w.sent)
}
