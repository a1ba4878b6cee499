package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/anthropic"
)

var messagesBody = `{"model":"` + DefaultOptions().Model + `","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=1;"},{"type":"text","text":"` +
	`You are a careful coding agent who reads files before editing them and explains each change."}],` +
	`"tools":[{"name":"Read","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
	`"messages":[{"role":"user","content":"Fix the failing test in the parser package please."}]}`

// The simulator serves /v1/messages as vLLM does: a message with usage, the
// second time with the prompt's blocks read from the cache, and a stream
// of Anthropic events whose message_delta carries the final usage.
func TestMessages(t *testing.T) {
	s := start(t, func(o *Options) {
		fast(o)
		o.EnablePromptTokensDetails = true
	})
	status, _, body := post(t, s, "/v1/messages", messagesBody)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var msg struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || len(msg.Content) != 1 || msg.Content[0].Text == "" {
		t.Fatalf("message %s: %v", body, err)
	}
	first, ok := anthropic.FindUsage([]byte(body))
	if !ok || first.Output != 8 || first.Input == 0 || !first.HasCacheRead || first.CacheRead != 0 {
		t.Fatalf("first usage %+v in %s", first, body)
	}
	if !strings.Contains(body, `"type":"message","role":"assistant"`) || !strings.Contains(body, `"stop_reason":"max_tokens"`) {
		t.Errorf("stop_reason: %s", body)
	}
	// Streamed, the same prompt again: its full blocks are cached.
	req, _ := http.NewRequest("POST", s.URL()+"/v1/messages", strings.NewReader(strings.Replace(messagesBody, `"max_tokens":8,`, `"max_tokens":8,"stream":true,`, 1)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	if len(events) < 5 || !strings.HasPrefix(events[0], "event: message_start") || !strings.HasPrefix(events[len(events)-1], "event: message_stop") {
		t.Fatalf("events: %q", events)
	}
	delta := events[len(events)-2]
	_, data, _ := strings.Cut(delta, "data: ")
	u, ok := anthropic.FindUsage([]byte(data))
	total := first.Input + first.CacheRead
	if !ok || u.Output != 8 || u.CacheRead == 0 || u.Input+u.CacheRead != total {
		t.Fatalf("streamed usage %+v (prompt %d) in %q", u, total, delta)
	}
	// count_tokens gives the prompt's length.
	status, _, body = post(t, s, "/v1/messages/count_tokens", strings.Replace(messagesBody, `"max_tokens":8,`, "", 1))
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &ct) != nil || ct.InputTokens != total {
		t.Fatalf("count_tokens %d %s, want %d", status, body, total)
	}
	// Errors are in Anthropic's envelope.
	status, _, body = post(t, s, "/v1/messages", `{"model":"`+DefaultOptions().Model+`","messages":[]}`)
	if status != 400 || !strings.HasPrefix(body, `{"type":"error","error":{"type":`) {
		t.Fatalf("error %d %s", status, body)
	}
}

// The simulator serves /v1/embeddings in vLLM's shape: one vector per
// input, the same for the same input, and usage with the prompts' tokens.
func TestEmbeddings(t *testing.T) {
	s := start(t, fast)
	m := DefaultOptions().Model
	var r struct {
		Object string
		Data   []struct {
			Index     int
			Object    string
			Embedding []float64
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	status, _, body := post(t, s, "/v1/embeddings", `{"model":"`+m+`","input":["one two three","one two three","four five"]}`)
	if status != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Object != "list" || len(r.Data) != 3 {
		t.Fatalf("%d %s", status, body)
	}
	if len(r.Data[0].Embedding) != embeddingDims || fmt.Sprint(r.Data[0].Embedding) != fmt.Sprint(r.Data[1].Embedding) ||
		fmt.Sprint(r.Data[0].Embedding) == fmt.Sprint(r.Data[2].Embedding) || r.Data[2].Index != 2 {
		t.Errorf("embeddings %s", body)
	}
	if r.Usage.PromptTokens == 0 || r.Usage.TotalTokens != r.Usage.PromptTokens {
		t.Errorf("usage %s", body)
	}
	if status, _, body := post(t, s, "/v1/embeddings", `{"model":"nope","input":"x"}`); status != 404 {
		t.Errorf("unknown model: %d %s", status, body)
	}
	// encoding_format base64 (the openai SDKs' default): the same vectors'
	// float32 values, little-endian, in base64.
	var enc struct{ Data []struct{ Embedding string } }
	status, _, body = post(t, s, "/v1/embeddings", `{"model":"`+m+`","input":["one two three","four five"],"encoding_format":"base64"}`)
	if status != 200 || json.Unmarshal([]byte(body), &enc) != nil || len(enc.Data) != 2 {
		t.Fatalf("base64: %d %s", status, body)
	}
	for i, want := range []int{0, 2} {
		raw, err := base64.StdEncoding.DecodeString(enc.Data[i].Embedding)
		if err != nil || len(raw) != 4*embeddingDims {
			t.Fatalf("base64 embedding %d: %q %v", i, enc.Data[i].Embedding, err)
		}
		for d, v := range r.Data[want].Embedding {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*d:])); got != float32(v) {
				t.Errorf("base64 embedding %d, value %d: %v, the float answer %v", i, d, got, v)
			}
		}
	}
	if status, _, body := post(t, s, "/v1/embeddings", `{"model":"`+m+`","input":"x","encoding_format":"hex"}`); status != 400 {
		t.Errorf("encoding_format hex: %d %s", status, body)
	}
}
