package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/sim/workload"
	"github.com/inferrail/inferrail/transport/upstream"
)

// Target is the endpoint a run measures.
type Target struct {
	// URL is the OpenAI-compatible base URL, such as http://127.0.0.1:8080.
	URL string
	// Model is every request's model field.
	Model string
	// Metrics are the engines' /metrics URLs, whose prefix cache counters
	// are read after the warm-up and at the end; none skips them.
	Metrics []string
}

// Options describe one run.
type Options struct {
	Workload workload.Workload
	// Rate is the workload's mean requests per second.
	Rate float64
	// Requests due from zero to Duration are sent; those due before WarmUp
	// are left out of the summary.
	Duration, WarmUp time.Duration
	Seed             uint64
	// Timeout bounds each request; 0 takes 10 minutes.
	Timeout time.Duration

	// beforeSend, when set (tests), runs in the send loop before request
	// i is handed to its goroutine.
	beforeSend func(i int)
}

// Validate reports every problem with o.
func (o *Options) Validate() error {
	var errs []error
	if o.Workload == nil {
		errs = append(errs, errors.New("workload: not set"))
	} else if err := o.Workload.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !(o.Rate > 0) || o.Rate > 1e6 {
		errs = append(errs, fmt.Errorf("rate %v: want 0 < rate <= 1e6", o.Rate))
	}
	if o.Duration <= 0 || o.WarmUp < 0 || o.WarmUp >= o.Duration {
		errs = append(errs, fmt.Errorf("duration %v, warm-up %v: want 0 <= warm-up < duration", o.Duration, o.WarmUp))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want at least 0", o.Timeout))
	}
	return errors.Join(errs...)
}

// Plan is a run's requests, scheduled and encoded before the run so that
// the send loop does nothing but send.
type Plan struct {
	Requests []workload.Request
	Bodies   [][]byte
}

// NewPlan draws the requests of o due before o.Duration and encodes their
// bodies for model.
func NewPlan(o *Options, model string) *Plan {
	p := &Plan{}
	src := o.Workload.Start(o.Seed, o.Rate)
	for {
		r := src.Next()
		if r.At >= o.Duration {
			return p
		}
		p.Bodies = append(p.Bodies, AppendBody(nil, model, &r))
		r.Tokens = nil // in the body now; a trace's prompts are long
		p.Requests = append(p.Requests, r)
	}
}

// AppendBody appends r's streaming request body for model: a chat
// completion of its messages or a completion of its prompt, with
// max_tokens and a final usage chunk (a prompt of token ids goes as
// JSON's list of ints, which vLLM and the gateway take on /v1/completions); or an Anthropic request's Messages
// body, streamed (its events carry the usage).
func AppendBody(dst []byte, model string, r *workload.Request) []byte {
	if r.IsMessages() {
		return workload.AppendMessagesBody(dst, model, r, true)
	}
	dst = append(dst, `{"model":`...)
	dst = appendString(dst, model)
	if r.Chat() {
		dst = append(dst, `,"messages":[`...)
		for i, m := range r.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"role":`...)
			dst = appendString(dst, m.Role)
			dst = append(dst, `,"content":`...)
			dst = appendString(dst, m.Content)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	} else if len(r.Tokens) > 0 {
		dst = append(dst, `,"prompt":[`...)
		for i, id := range r.Tokens {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(id), 10)
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, `,"prompt":`...)
		dst = appendString(dst, r.Prompt)
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.MaxTokens), 10)
	return append(dst, `,"stream":true,"stream_options":{"include_usage":true}}`...)
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

func path(r *workload.Request) string {
	if r.IsMessages() {
		return "/v1/messages"
	}
	if r.Chat() {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// Measure runs o against t in real time and returns what every request
// did. Each request is sent at its scheduled time from its own goroutine;
// Measure returns when every one has finished or failed. ctx stops the
// sending; requests already sent run to their end or their timeout.
func Measure(ctx context.Context, t Target, o Options) (*Run, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return MeasurePlan(ctx, t, o, NewPlan(&o, t.Model))
}

// MeasurePlan is Measure with the requests drawn already.
func MeasurePlan(ctx context.Context, t Target, o Options, p *Plan) (*Run, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	// The gateway's own upstream client: keep-alive connections, bodies
	// streamed as they arrive, and a request's context closing its
	// connection.
	pool, err := upstream.NewPool(t.URL, upstream.Options{MaxIdleConns: 4096})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	scraper := &fasthttp.Client{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		MaxResponseBodySize: 4 << 20, NoDefaultUserAgentHeader: true}
	defer scraper.CloseIdleConnections()

	n := len(p.Requests)
	run := &Run{Records: make([]Record, n), WarmUp: o.WarmUp, Duration: o.Duration}
	gaps := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var before []Counters
	var beforeErr error
	start := time.Now().Add(10 * time.Millisecond) // room to start the pacer
	if len(t.Metrics) > 0 {
		wg.Go(func() {
			tm := time.NewTimer(time.Until(start.Add(o.WarmUp)))
			defer tm.Stop()
			select {
			case <-tm.C:
				before, beforeErr = scrape(scraper, t.Metrics)
			case <-ctx.Done():
				beforeErr = ctx.Err()
			}
		})
	}
	pc := newPacer()
	for i := range p.Requests {
		r := &p.Requests[i]
		rec := &run.Records[i]
		rec.Class, rec.Due, rec.WarmUp = r.Class, r.At, r.At < o.WarmUp
		if ctx.Err() != nil {
			rec.Err = "not sent"
			continue
		}
		due := start.Add(r.At)
		pc.sleepUntil(due)
		if o.beforeSend != nil {
			o.beforeSend(i)
		}
		session := r.Session
		if r.IsMessages() {
			// Claude Code sends no x-session-id: its body's
			// metadata.user_id names the session.
			session = ""
		}
		wg.Go(func() {
			gaps[i] = do(ctx, pool, path(r), session, p.Bodies[i], due, rec, timeout)
		})
	}
	pc.close()
	wg.Wait()
	for i := range run.Records {
		if !run.Records[i].WarmUp && run.Records[i].Err == "" {
			run.ITL = append(run.ITL, gaps[i]...)
		}
	}
	if len(t.Metrics) > 0 && beforeErr == nil {
		after, err := scrape(scraper, t.Metrics)
		if err == nil {
			c := Counters{}
			for i := range after {
				c.Queries += after[i].Queries - before[i].Queries
				c.Hits += after[i].Hits - before[i].Hits
				c.Preemptions += after[i].Preemptions - before[i].Preemptions
			}
			run.Engine = &c
		}
	}
	return run, ctx.Err()
}

// Markers in stream chunks: a content chunk carries non-empty text in
// delta.content (chat) or text (completions); the usage chunk and error
// events are parsed whole.
var (
	markContent = []byte(`"content":"`)
	markText    = []byte(`"text":"`)
	markUsage   = []byte(`"usage":{`)
	markError   = []byte(`"error"`)
	markDone    = []byte("[DONE]")
)

// do sends one request at due and reads its stream into rec, returning the
// gaps between its tokens.
func do(ctx context.Context, pool *upstream.Pool, path, session string, body []byte, due time.Time, rec *Record, timeout time.Duration) []time.Duration {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI(path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	req.SetBodyRaw(body)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rec.Lag = time.Since(due)
	resp, err := pool.Do(ctx, req)
	if err != nil {
		rec.Err = "send: " + errClass(err)
		return nil
	}
	defer resp.Close()
	if rep := resp.Header.Peek("X-Inferrail-Replica"); len(rep) > 0 {
		rec.Replica = string(rep)
	}
	if pol := resp.Header.Peek("X-Inferrail-Policy"); len(pol) > 0 {
		rec.Policy = string(pol)
	}
	if v := resp.Header.Peek("X-Inferrail-Cached-Tokens"); len(v) > 0 {
		if n, err := strconv.Atoi(string(v)); err == nil {
			rec.PredictedTokens, rec.Predicted = n, true
		}
	}
	if st := resp.StatusCode(); st != fasthttp.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp, 1<<16))
		rec.Err = "status " + strconv.Itoa(st)
		return nil
	}
	var gaps []time.Duration
	var last time.Time
	usage, done := false, false
	// A Messages stream (Anthropic's events) ends with message_stop and
	// has its usage in message_start, updated by message_delta.
	messages := path == "/v1/messages"
	var mu anthropic.Usage
	sr := loadgen.NewSSEReader(resp)
	for {
		_, data, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rec.Err = "stream: " + errClass(err)
			return nil
		}
		now := time.Now()
		switch {
		case bytes.Equal(data, markDone):
			done = true
		case messages && bytes.Contains(data, markUsage):
			if u, ok := anthropic.FindUsage(data); ok {
				mu = anthropic.Merge(mu, u)
				usage = usage || u.HasInput
				o := mu.OpenAI()
				rec.PromptTokens, rec.OutputTokens, rec.CachedTokens = o.PromptTokens, o.CompletionTokens, o.CachedTokens
			}
		case messages && anthropic.Event(data) == "message_stop":
			done = true
		case bytes.Contains(data, markUsage) || bytes.Contains(data, markError):
			var c chunk
			if err := json.Unmarshal(data, &c); err != nil {
				rec.Err = "stream: bad chunk"
				return nil
			}
			if c.Error != nil {
				rec.Err = "stream: error event"
				return nil
			}
			if u, ok := openai.FindUsage(data); ok {
				usage = true
				rec.PromptTokens, rec.OutputTokens, rec.CachedTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens
			}
			if len(c.Choices) > 0 && c.Choices[0].hasText() {
				gaps = tokenAt(rec, gaps, &last, now, due)
			}
		case hasText(data):
			gaps = tokenAt(rec, gaps, &last, now, due)
		}
	}
	rec.E2E = time.Since(due)
	switch {
	case !done:
		rec.Err = "stream: no [DONE]"
	case !usage:
		rec.Err = "stream: no usage"
	case rec.TTFT == 0:
		rec.Err = "stream: no token"
	}
	return gaps
}

// tokenAt records a token arriving at now.
func tokenAt(rec *Record, gaps []time.Duration, last *time.Time, now, due time.Time) []time.Duration {
	if rec.TTFT == 0 {
		rec.TTFT = max(now.Sub(due), 1)
	} else {
		gaps = append(gaps, now.Sub(*last))
	}
	*last = now
	return gaps
}

// hasText reports whether a chunk carries generated text.
func hasText(data []byte) bool {
	for _, m := range [...][]byte{markContent, markText} {
		if i := bytes.Index(data, m); i >= 0 && i+len(m) < len(data) && data[i+len(m)] != '"' {
			return true
		}
	}
	return false
}

// chunk is the part of a stream chunk parsed whole.
type chunk struct {
	Choices []choice `json:"choices"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type choice struct {
	Delta *struct {
		Content *string `json:"content"`
	} `json:"delta"`
	Text *string `json:"text"`
}

func (c *choice) hasText() bool {
	return c.Delta != nil && c.Delta.Content != nil && *c.Delta.Content != "" || c.Text != nil && *c.Text != ""
}

// errClass names an error briefly for the summary's error kinds.
func errClass(err error) string {
	var dial *upstream.DialError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &dial):
		return "dial"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// scrape reads the prefix cache counters of every engine.
func scrape(hc *fasthttp.Client, urls []string) ([]Counters, error) {
	out := make([]Counters, len(urls))
	for i, u := range urls {
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		req.SetRequestURI(u)
		err := hc.DoTimeout(req, resp, 5*time.Second)
		page := append([]byte(nil), resp.Body()...)
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if err != nil {
			return nil, fmt.Errorf("engine metrics %s: %w", u, err)
		}
		var ok1, ok2 bool
		out[i].Queries, ok1 = loadgen.PromSum(page, "vllm:prefix_cache_queries_total")
		out[i].Hits, ok2 = loadgen.PromSum(page, "vllm:prefix_cache_hits_total")
		out[i].Preemptions, _ = loadgen.PromSum(page, "vllm:num_preemptions_total")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("engine metrics %s: no prefix cache counters", u)
		}
	}
	return out, nil
}
