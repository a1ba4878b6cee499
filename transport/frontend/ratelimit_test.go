package frontend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/ratelimit"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// clock is a time the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startLimited is a gateway whose rate limits read clk, over urls (one
// simulator when nil).
func startLimited(t *testing.T, urls []string, clk *clock, edit func(*config.Config)) *gw {
	t.Helper()
	if urls == nil {
		_, urls = startSims(t, 1, nil)
	}
	return startOpts(t, urls, edit, func(o *Options) {
		o.Limits = ratelimit.New(o.Config, nil, clk.Now)
		o.Metrics = telemetry.New(o.Fleet)
		o.Metrics.Include(o.Limits.Metrics())
	})
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

func header(t *testing.T, resp *http.Response, key string) int64 {
	t.Helper()
	v := resp.Header.Get(key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", key, v, err)
	}
	return n
}

// apiErr is an OpenAI error body with a string code.
type apiErr struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeErr(t *testing.T, body string) apiErr {
	t.Helper()
	var e apiErr
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}

// TestRateLimitRequests: within the limit, answers carry OpenAI's request
// headers counting down; over it, 429 rate_limit_exceeded of type
// requests, with Retry-After and retry-after-ms that admit the next try;
// throttles are counted by tenant and reason.
func TestRateLimitRequests(t *testing.T) {
	clk := newClock()
	g := startLimited(t, nil, clk, func(c *config.Config) { c.RateLimits.Default.RequestsPerSecond = 4 })
	for i := range 4 {
		resp, body := g.post("/v1/chat/completions", chat("hi", 2, false))
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		if l, r := header(t, resp, "X-Ratelimit-Limit-Requests"), header(t, resp, "X-Ratelimit-Remaining-Requests"); l != 4 || r != int64(3-i) {
			t.Errorf("request %d: limit %d remaining %d, want 4 and %d", i, l, r, 3-i)
		}
		if got, want := resp.Header.Get("X-Ratelimit-Reset-Requests"), (time.Duration(i+1) * 250 * time.Millisecond).String(); got != want {
			t.Errorf("request %d: reset %q, want %q", i, got, want)
		}
		if resp.Header.Get("X-Ratelimit-Limit-Tokens") != "" {
			t.Error("tokens headers without a token limit")
		}
	}
	clk.add(100 * time.Millisecond)
	resp, body := g.post("/v1/chat/completions", chat("hi", 2, false))
	e := decodeErr(t, body)
	if resp.StatusCode != 429 || e.Error.Type != "requests" || e.Error.Code != "rate_limit_exceeded" ||
		!strings.Contains(e.Error.Message, "try again in 150ms") {
		t.Fatalf("over the limit: %d %s", resp.StatusCode, body)
	}
	if ra, ms := resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"); ra != "1" || ms != "150" {
		t.Errorf("Retry-After %q, retry-after-ms %q; want 1 and 150", ra, ms)
	}
	if r := header(t, resp, "X-Ratelimit-Remaining-Requests"); r != 0 {
		t.Errorf("remaining %d on a 429", r)
	}
	clk.add(149 * time.Millisecond)
	if resp, _ := g.post("/v1/chat/completions", chat("hi", 2, false)); resp.StatusCode != 429 {
		t.Errorf("1 ms before Retry-After: %d", resp.StatusCode)
	}
	clk.add(time.Millisecond)
	if resp, body := g.post("/v1/chat/completions", chat("hi", 2, false)); resp.StatusCode != 200 {
		t.Errorf("at Retry-After: %d %s", resp.StatusCode, body)
	}
	var m bytes.Buffer
	g.fe.met.WritePrometheus(&m)
	for _, want := range []string{`inferrail_ratelimit_throttled_total{tenant="",reason="requests"} 2`,
		`inferrail_ratelimit_throttled_total{tenant="",reason="tokens"} 0`,
		`inferrail_request_errors_total{model="inferrail/sim-8b",reason="rate_limited"} 2`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// usageOf reads a non-streamed response's usage.
func usageOf(t *testing.T, body string) int64 {
	t.Helper()
	var r struct {
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Usage.Prompt == 0 {
		t.Fatalf("no usage in %s: %v", body, err)
	}
	return r.Usage.Prompt + r.Usage.Completion
}

// reserved is what the gateway reserves for a chat body without a
// tokenizer: its length / 4, once the alias is replaced by the model's
// name, and max_tokens.
func reserved(body string, maxTokens int) int64 {
	body = strings.Replace(body, `"model":"sim"`, `"model":"`+model+`"`, 1)
	return int64(len(body)/bytesPerToken + maxTokens)
}

// TestRateLimitSettle: a request reserves its estimate and, at the end,
// is charged what the engine's usage says, streamed (include_usage) or
// not; a request no engine answered is refunded its tokens.
func TestRateLimitSettle(t *testing.T) {
	clk := newClock()
	g := startLimited(t, nil, clk, func(c *config.Config) { c.RateLimits.Default.TokensPerMinute = 60000 })
	body := chat(strings.Repeat("a few words ", 40), 50, false)
	resp, out := g.post("/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	r1 := reserved(body, 50)
	if rem := header(t, resp, "X-Ratelimit-Remaining-Tokens"); rem != 60000-r1 {
		t.Errorf("first answer: remaining %d, want %d (reserved %d)", rem, 60000-r1, r1)
	}
	used := usageOf(t, out)
	if used == r1 {
		t.Fatalf("the engine used exactly the estimate (%d): the test cannot tell settling from not", used)
	}
	// The next request sees the first settled to its usage.
	small := chat("hi", 3, false)
	resp, _ = g.post("/v1/chat/completions", small)
	if rem, want := header(t, resp, "X-Ratelimit-Remaining-Tokens"), 60000-used-reserved(small, 3); rem != want {
		t.Errorf("after settling: remaining %d, want %d (used %d, not the %d reserved)", rem, want, used, r1)
	}

	// Streamed, with usage in the last chunk.
	g2 := startLimited(t, nil, newClock(), func(c *config.Config) { c.RateLimits.Default.TokensPerMinute = 60000 })
	sb := chat(strings.Repeat("a few words ", 40), 50, true)
	resp, out = g2.post("/v1/chat/completions", sb)
	if resp.StatusCode != 200 || !strings.Contains(out, `"usage"`) {
		t.Fatalf("stream: %d %s", resp.StatusCode, out)
	}
	var su int64
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "data: {") && strings.Contains(line, `"usage":{`) {
			su = usageOf(t, strings.TrimPrefix(line, "data: "))
		}
	}
	if su == 0 || su == reserved(sb, 50) {
		t.Fatalf("stream usage %d: none, or the estimate", su)
	}
	waitFor(t, "the stream's settle", 2*time.Second, func() bool {
		level, _ := g2.fe.limits.Tokens("")
		return level == float64(60000-su)
	})

	// An engine's error answer generated nothing: the tokens come back.
	g4 := startLimited(t, nil, newClock(), func(c *config.Config) { c.RateLimits.Default.TokensPerMinute = 60000 })
	bad := `{"model":"sim","prompt":"hi","max_tokens":50,"temperature":"hot"}`
	if resp, out := g4.post("/v1/completions", bad); resp.StatusCode != 400 {
		t.Fatalf("a body the engine refuses: %d %s", resp.StatusCode, out)
	}
	if level, _ := g4.fe.limits.Tokens(""); level != 60000 {
		t.Errorf("after the engine's 400: level %v, want the full 60000 back", level)
	}

	// No engine answers: the tokens come back.
	g3 := startLimited(t, []string{"http://127.0.0.1:1"}, newClock(), func(c *config.Config) {
		c.RateLimits.Default.TokensPerMinute = 60000
		c.Retry.MaxAttempts = 1
	})
	resp, out = g3.post("/v1/chat/completions", body)
	if resp.StatusCode < 500 {
		t.Fatalf("dead replica: %d %s", resp.StatusCode, out)
	}
	resp, _ = g3.post("/v1/chat/completions", small)
	if rem, want := header(t, resp, "X-Ratelimit-Remaining-Tokens"), 60000-reserved(small, 3); rem != want {
		t.Errorf("after a request no engine answered: remaining %d, want %d", rem, want)
	}
}

// TestRateLimitTokens: over the token limit, 429 of type tokens with
// Retry-After; a request larger than the whole bucket is refused without
// one, since no wait admits it.
func TestRateLimitTokens(t *testing.T) {
	clk := newClock()
	g := startLimited(t, nil, clk, func(c *config.Config) { c.RateLimits.Default.TokensPerMinute = 600 })
	body := chat("hi", 300, false)
	for {
		resp, out := g.post("/v1/chat/completions", body)
		if resp.StatusCode == 200 {
			continue
		}
		e := decodeErr(t, out)
		if resp.StatusCode != 429 || e.Error.Type != "tokens" || e.Error.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("over the token limit: %d %s %v", resp.StatusCode, out, resp.Header)
		}
		if l := header(t, resp, "X-Ratelimit-Limit-Tokens"); l != 600 {
			t.Errorf("limit-tokens %d", l)
		}
		break
	}
	resp, out := g.post("/v1/chat/completions", chat("hi", 700, false))
	e := decodeErr(t, out)
	if resp.StatusCode != 429 || e.Error.Type != "tokens" || !strings.Contains(e.Error.Message, "Request too large") ||
		resp.Header.Get("Retry-After") != "" || resp.Header.Get("Retry-After-Ms") != "" {
		t.Errorf("too large: %d %s %v", resp.StatusCode, out, resp.Header)
	}
}

// TestRateLimitTenantsAndReload: each tenant has its own bucket, a
// tenant's entry overrides the default, and a live reload changes a limit
// for the next request, keeping what the tenant used.
func TestRateLimitTenantsAndReload(t *testing.T) {
	clk := newClock()
	a := startAuth(t, nil, func(c *config.Config) {
		c.RateLimits.Default.RequestsPerSecond = 1
		two := 2.0
		c.RateLimits.Tenants = []config.TenantRateLimit{{Tenant: "team-r", RequestsPerSecond: &two}}
	})
	// startAuth builds its own Limiter on the real clock; swap one on clk in.
	a.fe.limits = ratelimit.New(a.cfg, nil, clk.Now)
	post := func(key string) int {
		resp, _ := a.post("/v1/chat/completions", chat("hi", 2, false), "Authorization", "Bearer "+key)
		return resp.StatusCode
	}
	got := []int{post(restrictedKey), post(restrictedKey), post(restrictedKey), post(openKey), post(openKey)}
	if want := []int{200, 200, 429, 200, 429}; !slices.Equal(got, want) {
		t.Fatalf("team-r at 2/s then open at 1/s: %v, want %v", got, want)
	}
	next := *a.cfg
	next.RateLimits.Default.RequestsPerSecond = 3
	a.fe.SetConfig(&next)
	// open used its one; at 3/s it has 0 of 3 left until it refills.
	if c := post(openKey); c != 429 {
		t.Errorf("raised to 3/s at once: %d; the one used is kept", c)
	}
	clk.add(time.Second)
	got = []int{post(openKey), post(openKey), post(openKey), post(openKey)}
	if want := []int{200, 200, 200, 429}; !slices.Equal(got, want) {
		t.Errorf("a second later at 3/s: %v, want %v", got, want)
	}
	next2 := next
	next2.RateLimits = config.RateLimits{}
	a.fe.SetConfig(&next2)
	for range 5 {
		if c := post(openKey); c != 200 {
			t.Fatalf("limits off: %d", c)
		}
	}
}

// TestResetFormat: OpenAI's reset format is Go's Duration format; ours is
// the duration rounded up to the millisecond.
func TestResetFormat(t *testing.T) {
	for _, d := range []time.Duration{0, 1, time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		6 * time.Minute, 6*time.Minute + 20*time.Millisecond, 59*time.Second + 999*time.Millisecond, time.Hour,
		time.Hour + 2*time.Second, 25*time.Hour + 61*time.Minute + 100*time.Millisecond, 8640 * time.Millisecond} {
		want := ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
		if got := resetFormat(d); got != want {
			t.Errorf("resetFormat(%v) = %q, want %q", d, got, want)
		}
	}
	if got := resetFormat(-time.Second); got != "0s" {
		t.Errorf("negative: %q", got)
	}
}
