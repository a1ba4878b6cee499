package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// FuzzRequest sends arbitrary bodies to both generation endpoints and checks
// that every answer is vLLM-shaped: a 200 with a completion or a stream that
// ends in [DONE], or a 4xx whose body is an error object naming its status.
func FuzzRequest(f *testing.F) {
	seeds := []string{
		chatBody,
		`{"prompt":"hi","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"prompt":[1,2,3],"max_tokens":2}`,
		`{"prompt":["a","b"]}`,
		`{"prompt":[[1,2],[3]],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"prompt":[[1,2],[]],"max_tokens":2}`, `{"prompt":["a",""],"max_tokens":2}`, `{"prompt":[[1],[99999999]]}`,
		`{"messages":[],"max_tokens":-1}`,
		`{"model":null,"messages":[{"role":"user","content":null}],"stream":true}`,
		`[1,2,3]`, `null`, `{"prompt":"\ud800"}`, "\xff\xfe", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":40000}`,
	}
	for _, s := range seeds {
		f.Add(s, true)
		f.Add(s, false)
	}
	s := start(f, func(o *Options) { fast(o); o.Engine.MaxModelLen = 4096; o.Engine.NumBlocks = 512 })
	c := &fasthttp.Client{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		resp := fuzzPost(t, c, s.URL()+path, body)
		defer fasthttp.ReleaseResponse(resp)
		code := resp.StatusCode()
		out := resp.Body()
		switch {
		case code == 200 && bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")):
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Fatalf("%q: stream does not end with [DONE]: %q", body, out)
			}
			for _, ev := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
				data, ok := strings.CutPrefix(ev, "data: ")
				if !ok || (data != "[DONE]" && !json.Valid([]byte(data))) {
					t.Fatalf("%q: bad event %q", body, ev)
				}
			}
		case code == 200:
			var r struct {
				ID    string `json:"id"`
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(out, &r); err != nil || r.ID == "" || r.Usage.CompletionTokens < 1 {
				t.Fatalf("%q: bad completion %q", body, out)
			}
		case code >= 400 && code < 500:
			decodeError(t, code, string(out))
		default:
			t.Fatalf("%q: status %d: %q", body, code, out)
		}
	})
}

// FuzzTokenizerEndpoints sends arbitrary bodies to /detokenize and both
// render endpoints: every answer is a 200 in the endpoint's shape (a
// DetokenizeResponse, a GenerateRequest, a list of them) or a 4xx error
// object naming its status.
func FuzzTokenizerEndpoints(f *testing.F) {
	paths := []string{"/detokenize", "/v1/chat/completions/render", "/v1/completions/render"}
	for _, s := range []string{
		`{"tokens":[1,2,300]}`, `{"model":"inferrail/sim-8b","tokens":[-1]}`, `{"tokens":[4294967296]}`, `{"tokens":"1"}`,
		chatBody, `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":"hi","max_tokens":3}`, `{"prompt":[1,2,40000]}`, `{"prompt":["a","b"]}`, `{"prompt":""}`,
		`[1]`, `null`, ``, "\xff", `{"messages":[{"role":"user","content":"x"}],"max_tokens":5000}`,
	} {
		for i := range paths {
			f.Add(s, uint8(i))
		}
	}
	s := start(f, func(o *Options) { fast(o); o.Engine.MaxModelLen = 4096; o.Engine.NumBlocks = 512 })
	c := &fasthttp.Client{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		path := paths[int(which)%len(paths)]
		resp := fuzzPost(t, c, s.URL()+path, body)
		defer fasthttp.ReleaseResponse(resp)
		code, out := resp.StatusCode(), resp.Body()
		switch {
		case code == 200 && path == "/detokenize":
			var r struct {
				Prompt *string `json:"prompt"`
			}
			if err := json.Unmarshal(out, &r); err != nil || r.Prompt == nil {
				t.Fatalf("%q: bad DetokenizeResponse %q", body, out)
			}
		case code == 200:
			type generateRequest struct {
				RequestID string   `json:"request_id"`
				TokenIDs  []uint32 `json:"token_ids"`
			}
			var rs []generateRequest
			var err error
			if path == "/v1/completions/render" {
				err = json.Unmarshal(out, &rs)
			} else {
				rs = make([]generateRequest, 1)
				err = json.Unmarshal(out, &rs[0])
			}
			if err != nil || len(rs) == 0 {
				t.Fatalf("%q: bad render answer %q", body, out)
			}
			for _, r := range rs {
				if r.RequestID == "" || len(r.TokenIDs) == 0 {
					t.Fatalf("%q: bad GenerateRequest in %q", body, out)
				}
			}
		case code >= 400 && code < 500:
			decodeError(t, code, string(out))
		default:
			t.Fatalf("%s %q: status %d: %q", path, body, code, out)
		}
	})
}

// fuzzPost POSTs a JSON body to url and returns the answer, which the
// caller releases.
func fuzzPost(t *testing.T, c *fasthttp.Client, url, body string) *fasthttp.Response {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI(url)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	if err := c.Do(req, resp); err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	return resp
}
