package harness

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/sim/workload"
)

// A Messages stream is read as Anthropic's events: its usage from
// message_start updated by message_delta (the prompt counted as
// input_tokens plus cache_read_input_tokens), its text from
// content_block_delta, its end at message_stop; a stream cut before
// message_stop, one whose usage never names the input, and an error event
// are failures. The request goes to /v1/messages without x-session-id.
func TestMessagesStream(t *testing.T) {
	const (
		start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":90,\"output_tokens\":0}}}\n\n"
		block = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"},\"index\":0}\n\n"
		delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"ab \"},\"index\":0}\n\n"
		final = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"input_tokens\":26,\"output_tokens\":2,\"cache_read_input_tokens\":64}}\n\n"
		stop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		fail  = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n"
	)
	type seen struct{ path, session string }
	got := make(chan seen, 1)
	var body string // set before each request, read by the handler after
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		got <- seen{string(ctx.Path()), string(ctx.Request.Header.Peek("X-Session-Id"))}
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyString(body)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	w := workload.NewClaudeCode()
	r := w.Start(1, 1).Next()
	r.At = 0
	o := Options{Workload: &w, Rate: 1, Duration: time.Second}
	p := &Plan{Requests: []workload.Request{r}, Bodies: [][]byte{AppendBody(nil, "m", &r)}}
	for _, c := range []struct {
		body, err string
	}{
		{start + block + delta + delta + final + stop, ""},
		{start + block + delta + final, "stream: no [DONE]"},
		{block + delta + "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":1}}\n\n" + stop, "stream: no usage"},
		{start + fail, "stream: error event"},
	} {
		body = c.body
		run, err := MeasurePlan(context.Background(), Target{URL: "http://" + ln.Addr().String(), Model: "m"}, o, p)
		if err != nil {
			t.Fatal(err)
		}
		rec, at := run.Records[0], <-got
		if rec.Err != c.err || at.path != "/v1/messages" || at.session != "" {
			t.Fatalf("stream %q: error %q at %s (x-session-id %q), want %q", c.body, rec.Err, at.path, at.session, c.err)
		}
		if c.err == "" && (rec.PromptTokens != 90 || rec.CachedTokens != 64 || rec.OutputTokens != 2 || rec.TTFT <= 0) {
			t.Fatalf("usage: prompt %d, cached %d, output %d, TTFT %v; want 90, 64, 2", rec.PromptTokens, rec.CachedTokens, rec.OutputTokens, rec.TTFT)
		}
	}
}
