package stress

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// Kinds of hostile request, as the table lists them.
const (
	kindBrokenJSON  = "broken JSON"
	kindHugeJSON    = "huge JSON"
	kindDeepJSON    = "deep JSON"
	kindWrongTypes  = "wrong types"
	kindBadUTF8     = "invalid UTF-8"
	kindHeaders     = "header abuse"
	kindRequestLine = "request line abuse"
	kindSlowloris   = "slowloris"
	kindOneByte     = "one-byte chunks"
	kindPipelining  = "pipelining"
	kindExpect      = "Expect abuse"
)

// hostileKinds is the order the table lists the kinds in.
var hostileKinds = []string{kindBrokenJSON, kindHugeJSON, kindDeepJSON, kindWrongTypes, kindBadUTF8, kindHeaders,
	kindRequestLine, kindSlowloris, kindOneByte, kindPipelining, kindExpect}

// expect is what the answer to one hostile request may be.
type expect struct {
	// statuses lists the acceptable 4xx statuses; empty accepts any 4xx.
	statuses []int
	ok       bool // a 200 is acceptable too: the request is valid despite its abuse
	no4xx    bool // a 4xx is not acceptable: the request is valid and must be served
	close    bool // closing the connection without answering is acceptable
	head     bool // the request is a HEAD: its answer has no body
	// id, when set, is the X-Request-Id a 200 must carry (pipelined
	// requests, to show the answers come back in order).
	id string
}

// step is one thing a hostile client does on its connection.
type step struct {
	write []byte
	// drip, when positive, writes write one byte at a time, each after
	// waiting drip, until the server answers or closes.
	drip time.Duration
	// await100 waits for a 100 Continue (or a final answer) before the
	// next step, at most a second, as RFC 9110 §10.1.1 lets a client do.
	await100 bool
}

// hostile is one hostile exchange on a connection of its own.
type hostile struct {
	kind, name string
	steps      []step
	// lazy, when set, builds the steps at run time: the heavy variants'
	// bodies (tens of MiB) exist only while they are sent.
	lazy func() []step
	want []expect // one per request sent, in order (several when pipelined)
	// noExtra: after the wanted answers, nothing more may come (a second
	// answer would mean a request was smuggled in the first one's body).
	noExtra bool
	// memory: the exchange runs alone, and the gateway's peak memory while
	// it runs is reported.
	memory bool
}

// build returns the exchange's steps.
func (h *hostile) build() []step {
	if h.steps == nil && h.lazy != nil {
		return h.lazy()
	}
	return h.steps
}

// slow reports whether the exchange waits on the server's read timeout.
func (h *hostile) slow() bool {
	for _, s := range h.steps {
		if s.drip > 0 {
			return true
		}
	}
	return false
}

// wire is every byte the exchange writes, in order.
func (h *hostile) wire() []byte {
	var b []byte
	for _, s := range h.build() {
		b = append(b, s.write...)
	}
	return b
}

// hostileSizes sizes the heavy variants.
type hostileSizes struct {
	MaxBody  int // the gateway's server.max_body_bytes
	Deep     int // nesting depth of the deep JSON variants
	OneByte  int // body bytes sent in one-byte chunks
	OneByteN int // how many of those exchanges
	HeavyN   int // how many of each heavy variant (huge bodies)
	SlowN    int // how many slowloris exchanges of each variant
}

// variant makes one hostile exchange of a kind. Its max bounds how many
// times it is repeated; 0 means as often as the total needs.
type variant struct {
	kind, name string
	max        int
	memory     bool // see hostile.memory
	make       func(g *hostileGen) hostile
}

// hostileGen builds hostile exchanges. It is owned by one goroutine.
type hostileGen struct {
	rng *rand.Rand
	sz  hostileSizes
	seq int // request ids
}

// hostileCases returns exchanges holding at least total requests: every
// variant once, then again round after round (each up to its max) until the
// total is reached. The same seed gives the same exchanges, shuffled so
// that concurrent workers mix the kinds.
func hostileCases(seed uint64, total int, sz hostileSizes) []hostile {
	g := &hostileGen{rng: rand.New(rand.NewPCG(seed, seed^0xa5a5a5a5a5a5a5a5)), sz: sz}
	vs := g.variants()
	used := make([]int, len(vs))
	var out []hostile
	count := 0
	for round := 0; round == 0 || count < total; round++ {
		added := false
		for i, v := range vs {
			if v.max > 0 && used[i] >= v.max {
				continue
			}
			if round > 0 && count >= total {
				break
			}
			h := v.make(g)
			h.kind, h.name, h.memory = v.kind, v.name, v.memory
			out = append(out, h)
			used[i]++
			count += len(h.want)
			added = true
		}
		if !added {
			break
		}
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// nextID is a fresh, valid X-Request-Id.
func (g *hostileGen) nextID() string {
	g.seq++
	return "hostile-" + strconv.Itoa(g.seq)
}

// chat picks chat or completions at random.
func (g *hostileGen) chat() bool { return g.rng.IntN(2) == 0 }

// pathOf is the generation path for a chat or a completion body.
func pathOf(chat bool) string {
	if chat {
		return chatPath
	}
	return completionsPath
}

// validBody is a well-formed request for one token.
func validBody(chat bool, prompt string) []byte {
	return loadgen.AppendBody(nil, modelName, loadgen.Spec{Chat: chat, MaxTokens: 1, Prompt: prompt})
}

// withField is a request body with one member replaced or added: raw is
// the member's value as it goes on the wire.
func withField(chat bool, name, raw string) []byte {
	fields := []string{`"model":"` + modelName + `"`, `"max_tokens":1`}
	if chat {
		fields = append(fields, `"messages":[{"role":"user","content":"hi"}]`)
	} else {
		fields = append(fields, `"prompt":"hi"`)
	}
	set := false
	for i, f := range fields {
		if strings.HasPrefix(f, `"`+name+`":`) {
			fields[i] = `"` + name + `":` + raw
			set = true
		}
	}
	if !set {
		fields = append(fields, `"`+name+`":`+raw)
	}
	return []byte("{" + strings.Join(fields, ",") + "}")
}

// request is an HTTP/1.1 request. Host is added unless a header sets it;
// Content-Length is added unless a header sets it or Transfer-Encoding.
func request(method, target string, headers []string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString(method + " " + target + " HTTP/1.1\r\n")
	has := func(name string) bool {
		for _, h := range headers {
			if len(h) > len(name) && strings.EqualFold(h[:len(name)+1], name+":") {
				return true
			}
		}
		return false
	}
	if !has("Host") {
		b.WriteString("Host: stress.invalid\r\n")
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if !has("Content-Length") && !has("Transfer-Encoding") && (body != nil || method == "POST") {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

var jsonCT = "Content-Type: application/json"

// postJSON is a JSON POST of body to path.
func postJSON(path string, body []byte, headers ...string) []byte {
	return request("POST", path, append([]string{jsonCT}, headers...), body)
}

// chunked encodes body with chunks of size n (the last may be shorter) and
// the terminating zero chunk.
func chunked(body []byte, n int) []byte {
	var b bytes.Buffer
	b.Grow(len(body) + len(body)/n*(len(strconv.FormatInt(int64(n), 16))+4) + 8)
	hex := strconv.FormatInt(int64(n), 16)
	for len(body) > 0 {
		k := min(n, len(body))
		if k == n {
			b.WriteString(hex)
		} else {
			b.WriteString(strconv.FormatInt(int64(k), 16))
		}
		b.WriteString("\r\n")
		b.Write(body[:k])
		b.WriteString("\r\n")
		body = body[k:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

func one(h hostile, e expect, steps ...step) hostile {
	h.steps, h.want = steps, []expect{e}
	return h
}

func w(b []byte) step { return step{write: b} }

// heavy is a variant whose single request is built only when it is sent.
func heavy(k string, e expect, wire func() []byte) variant {
	return variant{kind: k, make: func(*hostileGen) hostile {
		return hostile{want: []expect{e}, lazy: func() []step { return []step{w(wire())} }}
	}}
}

var (
	any4xx        = expect{}
	any4xxOrClose = expect{close: true}
	okOr4xx       = expect{ok: true}
	okOr4xxClose  = expect{ok: true, close: true}
	okOnly        = expect{ok: true, no4xx: true}
)

func status(s ...int) expect        { return expect{statuses: s} }
func statusOrClose(s ...int) expect { return expect{statuses: s, close: true} }

// fill is n bytes of "word " repeated, cut to n.
func fill(n int) string { return strings.Repeat("word ", n/5+1)[:n] }

// deep is depth levels of open, a core, and depth levels of close.
func deep(open, core, close string, depth int) string {
	return strings.Repeat(open, depth) + core + strings.Repeat(close, depth)
}

func (g *hostileGen) variants() []variant {
	sz := g.sz
	body := func(k string, f func(g *hostileGen, chat bool) []byte, e expect) variant {
		return variant{kind: k, make: func(g *hostileGen) hostile {
			chat := g.chat()
			return one(hostile{}, e, w(postJSON(pathOf(chat), f(g, chat))))
		}}
	}
	// at sends a body built for chat or completions to that path.
	at := func(k string, chat bool, f func() []byte, e expect) variant {
		return variant{kind: k, make: func(*hostileGen) hostile { return one(hostile{}, e, w(postJSON(pathOf(chat), f()))) }}
	}
	named := func(v variant, name string, max int) variant { v.name, v.max = name, max; return v }
	measured := func(v variant) variant { v.memory = true; return v }
	fixed := func(k string, raw string, e expect) variant {
		return body(k, func(*hostileGen, bool) []byte { return []byte(raw) }, e)
	}
	var vs []variant
	add := func(v variant, name string, max int) { vs = append(vs, named(v, name, max)) }

	// Broken JSON: every body here is invalid JSON (hostile_test checks).
	add(body(kindBrokenJSON, func(g *hostileGen, chat bool) []byte {
		b := validBody(chat, "truncated body")
		return b[:1+g.rng.IntN(len(b)-1)]
	}, any4xx), "truncated", 0)
	add(body(kindBrokenJSON, func(g *hostileGen, chat bool) []byte {
		tails := []string{"}", "]", "x", ",", "{}", "\x00", " null", `"`, "}}}}"}
		return append(validBody(chat, "trailing"), tails[g.rng.IntN(len(tails))]...)
	}, any4xx), "trailing garbage", 0)
	add(body(kindBrokenJSON, func(g *hostileGen, _ bool) []byte {
		b := make([]byte, 2+g.rng.IntN(512))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		b[0], b[len(b)-1] = '{', 'x'
		return b
	}, any4xx), "random bytes", 0)
	for i, raw := range []string{
		`{"model":"` + modelName + `","prompt":"x",}`,
		`{'model':'sim','prompt':'x'}`,
		`{"model":"sim" "prompt":"x"}`,
		`{"model":"sim","prompt":"x"/* c */}`,
		`{"model":"sim","prompt":"x","max_tokens":NaN}`,
		`{"model":"sim","prompt":"x","max_tokens":01}`,
		`{"model":"sim","prompt":"\x"}`,
		`{"model":"sim","prompt":"\u12"}`,
		`{"model":"sim","prompt":"a` + "\x01" + `b"}`,
		`{"model":"sim","prompt":"unterminated`,
		`{"model":"sim","prompt":"x"` + "\n",
		`{"model":"sim","prompt":x}`,
		`{"model"}`,
		`{"model":}`,
		`{:"sim"}`,
		`{"model":"sim","prompt":"x","max_tokens":1e}`,
		`{"model":"sim","prompt":"x","stream":tru}`,
	} {
		add(fixed(kindBrokenJSON, raw, any4xx), "syntax "+strconv.Itoa(i+1), 0)
	}
	add(fixed(kindBrokenJSON, "", any4xx), "empty body", 0)
	add(fixed(kindBrokenJSON, "-", any4xx), "a lone minus", 0)

	// Huge JSON.
	add(heavy(kindHugeJSON, any4xx, func() []byte {
		return postJSON(completionsPath, validBody(false, fill(sz.MaxBody-(1<<20))))
	}), "prompt just under server.max_body_bytes", sz.HeavyN)
	add(measured(heavy(kindHugeJSON, statusOrClose(413), func() []byte {
		return postJSON(completionsPath, validBody(false, fill(sz.MaxBody+(1<<20))))
	})), "over server.max_body_bytes, Content-Length", sz.HeavyN)
	add(measured(heavy(kindHugeJSON, statusOrClose(413), func() []byte {
		b := chunked(validBody(false, fill(sz.MaxBody+(1<<20))), 64<<10)
		return request("POST", completionsPath, []string{jsonCT, "Transfer-Encoding: chunked"}, b)
	})), "over server.max_body_bytes, chunked", sz.HeavyN)
	add(heavy(kindHugeJSON, any4xx, func() []byte {
		msgs := strings.Repeat(`{"role":"user","content":"hi"},`, 200000)
		return postJSON(chatPath, []byte(`{"model":"`+modelName+`","messages":[`+msgs[:len(msgs)-1]+`]}`))
	}), "200,000 messages", 10)
	add(heavy(kindHugeJSON, any4xx, func() []byte {
		var b strings.Builder
		for i := range 100000 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(i % 1000))
		}
		return postJSON(completionsPath, []byte(`{"model":"`+modelName+`","prompt":[`+b.String()+`],"max_tokens":1}`))
	}), "100,000-token prompt", 10)
	add(body(kindHugeJSON, func(_ *hostileGen, chat bool) []byte {
		return withField(chat, "max_tokens", "1"+strings.Repeat("0", 5000))
	}, any4xx), "5,000-digit number", 0)
	add(heavy(kindHugeJSON, any4xx, func() []byte {
		return postJSON(completionsPath, []byte(`{"model":"`+modelName+`","`+strings.Repeat("k", 1<<20)+`":1}`))
	}), "1 MiB key, no prompt", 10)

	// Deep JSON.
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON(chatPath, []byte(`{"model":"`+modelName+`","messages":`+deep("[", "", "]", sz.Deep)+`}`))
	}), "deep arrays as messages", 20)
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON(completionsPath, []byte(`{"model":"`+modelName+`","prompt":`+deep(`{"a":`, "1", "}", sz.Deep)+`}`))
	}), "deep objects as prompt", 20)
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON(chatPath, []byte(`{"model":"`+modelName+`","messages":`+strings.Repeat("[", sz.Deep)))
	}), "deep and never closed", 20)
	add(heavy(kindDeepJSON, okOr4xx, func() []byte {
		return postJSON(completionsPath, []byte(`{"x":`+deep("[", "", "]", sz.Deep)+`,"model":"`+modelName+`","prompt":"hi","max_tokens":1}`))
	}), "deep member before the model", 20)
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON(completionsPath, []byte(`{"model":`+deep("[", `"sim"`, "]", sz.Deep)+`,"prompt":"hi"}`))
	}), "deep model", 20)

	// Wrong types: valid JSON, wrong member types or values, each sent to
	// the path its body is for. The engine judges them; the ones that
	// vLLM's pydantic models accept in lax mode (true as 1, "yes" and 1 as
	// true, "1" as 1, any role name, no messages) may be served, and so
	// may the out-of-range sampling parameters, which the simulator does
	// not check as vLLM does.
	for _, f := range []struct {
		name, raw string
		e         expect
	}{
		{"messages", `"hello"`, any4xx}, {"messages", `42`, any4xx}, {"messages", `{}`, any4xx}, {"messages", `[42]`, any4xx},
		{"messages", `[]`, okOr4xx}, {"messages", `[{"role":42,"content":"x"}]`, any4xx},
		{"messages", `[{"role":"user","content":42}]`, any4xx}, {"messages", `[{"role":"wizard","content":"x"}]`, okOr4xx},
		{"messages", `[{"content":"x"}]`, any4xx}, {"max_tokens", `"10"`, okOr4xx}, {"max_tokens", `-1`, any4xx},
		{"max_tokens", `1.5`, any4xx}, {"max_tokens", `true`, okOr4xx}, {"max_tokens", `[]`, any4xx},
		{"stream", `"yes"`, okOr4xx}, {"stream", `1`, okOr4xx}, {"stream", `"maybe"`, any4xx}, {"temperature", `"hot"`, any4xx},
		{"temperature", `-5`, okOr4xx}, {"top_p", `2`, okOr4xx}, {"n", `0`, any4xx}, {"n", `"x"`, any4xx}, {"stop", `42`, any4xx},
		{"stream_options", `"x"`, any4xx}, {"logprobs", `"x"`, any4xx},
	} {
		add(at(kindWrongTypes, true, func() []byte { return withField(true, f.name, f.raw) }, f.e), "chat "+f.name+": "+f.raw, 0)
	}
	for _, f := range []struct {
		name, raw string
		e         expect
	}{
		{"prompt", `42`, any4xx}, {"prompt", `{}`, any4xx}, {"prompt", `[["a"]]`, any4xx}, {"prompt", `[1.5]`, any4xx},
		{"prompt", `[-1]`, any4xx}, {"prompt", `true`, any4xx}, {"prompt", `""`, any4xx}, {"prompt", `[]`, any4xx},
		{"max_tokens", `"1"`, okOr4xx}, {"echo", `"maybe"`, any4xx},
	} {
		add(at(kindWrongTypes, false, func() []byte { return withField(false, f.name, f.raw) }, f.e), "completion "+f.name+": "+f.raw, 0)
	}
	// The Responses API (/v1/responses): the gateway parses these to
	// render their prompt and to read previous_response_id.
	for _, f := range []struct {
		raw string
		e   expect
	}{
		{`"input":42`, any4xx}, {`"input":null`, any4xx}, {`"input":[42]`, any4xx}, {`"input":{}`, any4xx},
		{`"input":[{"role":"wizard","content":"x"}]`, any4xx}, {`"input":[{"role":"user","content":42}]`, any4xx},
		{`"input":[{"type":"function_call","name":7,"call_id":"c","arguments":"{}"}]`, any4xx},
		{`"input":[{"type":"function_call_output"}]`, any4xx}, {`"input":[{"type":"reasoning","content":[{"text":{}}]}]`, okOr4xx},
		{`"input":"hi","instructions":["x"]`, any4xx}, {`"input":"hi","tools":"x"`, any4xx}, {`"input":"hi","tools":[{"type":"function"}]`, any4xx},
		{`"input":"hi","previous_response_id":42`, any4xx}, {`"input":"hi","previous_response_id":"resp_` + strings.Repeat("x", 4096) + `"`, any4xx},
		{`"input":"hi","max_output_tokens":"x"`, any4xx}, {`"input":"hi","store":"yes"`, okOr4xx},
		{`"input":[{"type":"item_reference","id":"x"}]`, okOr4xx},
	} {
		add(variant{kind: kindWrongTypes, make: func(*hostileGen) hostile {
			return one(hostile{}, f.e, w(postJSON(responsesPath, []byte(`{"model":"`+modelName+`","max_output_tokens":1,`+f.raw+`}`))))
		}}, "responses "+f.raw[:min(len(f.raw), 60)], 0)
	}
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON(responsesPath, []byte(`{"model":"`+modelName+`","input":`+deep("[", "", "]", sz.Deep)+`}`))
	}), "deep arrays as Responses input", 20)
	// Token-id prompts, /tokenize, /detokenize and the render endpoints,
	// which the gateway parses to answer itself when the model has a
	// tokenizer (and to route on the ids of a token-id prompt). The
	// simulator's /tokenize takes a prompt of ids, which vLLM refuses.
	for _, f := range []struct {
		path, raw string
		e         expect
	}{
		{"/v1/completions", `"prompt":[1,"2",true,3.0],"max_tokens":1`, okOr4xx}, {"/v1/completions", `"prompt":[1,[2]]`, any4xx},
		{"/v1/completions", `"prompt":[[1,2],[3,"x"]]`, any4xx}, {"/v1/completions", `"prompt":[1e400]`, any4xx},
		{"/v1/completions", `"prompt":[4294967296]`, any4xx}, {"/v1/completions", `"prompt":[9223372036854775808]`, any4xx},
		{"/v1/completions", `"prompt":[[]]`, any4xx}, {"/v1/completions", `"prompt":[[1],[]]`, any4xx},
		{"/v1/completions", `"prompt":[31999,32000],"max_tokens":1`, any4xx}, {"/v1/completions", `"prompt":[-0],"max_tokens":1`, okOr4xx},
		{"/tokenize", `"prompt":42`, any4xx}, {"/tokenize", `"prompt":[1,2]`, okOr4xx}, {"/tokenize", `"messages":"x"`, any4xx},
		{"/tokenize", `"messages":[{"role":"user","content":42}]`, any4xx}, {"/tokenize", `"prompt":"x","add_special_tokens":"maybe"`, any4xx},
		{"/tokenize", `"prompt":"x","messages":[]`, okOr4xx}, {"/tokenize", `"prompt":"x","return_token_strs":"x"`, okOr4xx},
		{"/detokenize", `"tokens":"1"`, any4xx}, {"/detokenize", `"tokens":[-1]`, any4xx}, {"/detokenize", `"tokens":[1.5]`, any4xx},
		{"/detokenize", `"tokens":[1e400]`, any4xx}, {"/detokenize", `"tokens":[9223372036854775808]`, any4xx},
		{"/detokenize", `"tokens":null`, any4xx}, {"/detokenize", `"tokens":{}`, any4xx}, {"/detokenize", `"x":1`, any4xx},
		{"/detokenize", `"tokens":[[1]]`, any4xx}, {"/detokenize", `"tokens":[4294967296,1]`, okOr4xx},
		{"/detokenize", `"tokens":[true,"3",31999,32000]`, okOr4xx}, {"/detokenize", `"tokens":[]`, okOr4xx},
		{"/v1/chat/completions/render", `"messages":"x"`, any4xx}, {"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"max_tokens":-1`, any4xx},
		{"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"max_tokens":1000000000`, any4xx},
		{"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}`, any4xx},
		{"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"tools":"x"`, any4xx},
		{"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"priority":"x"`, any4xx},
		{"/v1/chat/completions/render", `"messages":[{"role":"user","content":"x"}],"stream":"yes"`, okOr4xx},
		{"/v1/chat/completions/render", `"messages":[]`, okOr4xx},
		{"/v1/completions/render", `"prompt":[-1]`, any4xx}, {"/v1/completions/render", `"prompt":""`, any4xx},
		{"/v1/completions/render", `"prompt":[[1],[2]]`, okOr4xx}, {"/v1/completions/render", `"prompt":{}`, any4xx},
		{"/v1/completions/render", `"prompt":[1,2],"max_tokens":"x"`, any4xx}, {"/v1/completions/render", `"prompt":"x","cache_salt":42`, any4xx},
		{"/v1/completions/render", `"prompt":[31999,32000]`, okOr4xx},
	} {
		add(variant{kind: kindWrongTypes, make: func(*hostileGen) hostile {
			return one(hostile{}, f.e, w(postJSON(f.path, []byte(`{"model":"`+modelName+`",`+f.raw+`}`))))
		}}, f.path+" "+f.raw[:min(len(f.raw), 60)], 0)
	}
	for _, path := range []string{"/tokenize", "/detokenize", "/v1/chat/completions/render", "/v1/completions/render"} {
		for _, c := range []struct{ kind, name, raw string }{
			{kindBrokenJSON, "truncated", `{"model":"` + modelName + `","tokens":[1,2`},
			{kindBrokenJSON, "trailing comma", `{"model":"` + modelName + `","prompt":"x","tokens":[1],}`},
			{kindBadUTF8, "invalid UTF-8", `{"model":"` + modelName + `","prompt":"a` + "\xff" + `","tokens":[1]}`},
		} {
			add(variant{kind: c.kind, make: func(*hostileGen) hostile {
				return one(hostile{}, any4xx, w(postJSON(path, []byte(c.raw))))
			}}, path+" "+c.name, 0)
		}
	}
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON("/detokenize", []byte(`{"model":"`+modelName+`","tokens":`+deep("[", "1", "]", sz.Deep)+`}`))
	}), "deep arrays as /detokenize tokens", 20)
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON("/v1/chat/completions/render", []byte(`{"model":"`+modelName+`","messages":`+deep("[", "", "]", sz.Deep)+`}`))
	}), "deep arrays as render messages", 20)
	add(heavy(kindDeepJSON, any4xx, func() []byte {
		return postJSON("/v1/completions/render", []byte(`{"model":"`+modelName+`","prompt":`+deep("[", "1", "]", sz.Deep)+`}`))
	}), "deep arrays as a render prompt", 20)
	for _, raw := range []string{`42`, `true`, `{}`, `[]`, `null`} {
		add(body(kindWrongTypes, func(_ *hostileGen, chat bool) []byte { return withField(chat, "model", raw) }, okOr4xx),
			"model: "+raw, 0)
	}
	for _, raw := range []string{"[]", `[{"model":"sim"}]`, `"sim"`, "42", "null", "true"} {
		add(fixed(kindWrongTypes, raw, any4xx), "body not an object: "+raw, 0)
	}

	// Invalid UTF-8: every body here fails utf8.Valid (hostile_test checks).
	for _, bad := range []string{"\xff\xfe", "\xc0\xaf", "\xed\xa0\x80", "\x80", "\xe2\x82", "\xf8\x88\x80\x80\x80"} {
		add(body(kindBadUTF8, func(_ *hostileGen, chat bool) []byte {
			return withField(chat, "prompt", `"ab`+bad+`cd"`)
		}, any4xx), fmt.Sprintf("%q in the prompt", bad), 0)
	}
	add(body(kindBadUTF8, func(_ *hostileGen, chat bool) []byte { return withField(chat, "model", `"sim`+"\xff"+`"`) }, any4xx),
		"in the model name", 0)
	add(at(kindBadUTF8, false, func() []byte { return []byte(`{"mo` + "\xff" + `del":"sim","prompt":"hi"}`) }, any4xx), "in a key", 0)
	add(at(kindBadUTF8, false, func() []byte { return []byte(`{"model":"sim","prompt":"hi","user":"` + "\xc3" + `"}`) }, any4xx),
		"truncated sequence at a string's end", 0)
	add(variant{kind: kindBadUTF8, make: func(g *hostileGen) hostile {
		return one(hostile{}, okOnly, w(postJSON(completionsPath, validBody(false, "hi"), "X-Request-Id: id-\xff\xfe")))
	}}, "in X-Request-Id", 0)
	add(variant{kind: kindBadUTF8, make: func(g *hostileGen) hostile {
		return one(hostile{}, any4xxOrClose, w(postJSON("/v1/\xffcompletions", validBody(false, "hi"))))
	}}, "in the path", 0)

	// Header abuse.
	hdr := func(name string, e expect, headers ...string) {
		add(variant{kind: kindHeaders, make: func(g *hostileGen) hostile {
			chat := g.chat()
			return one(hostile{}, e, w(postJSON(pathOf(chat), validBody(chat, "header abuse"), headers...)))
		}}, name, 0)
	}
	hdr("64 KiB header", any4xxOrClose, "X-Big: "+strings.Repeat("a", 64<<10))
	hdr("1,000 headers", any4xxOrClose, func() []string {
		var hs []string
		for i := range 1000 {
			hs = append(hs, "X-H-"+strconv.Itoa(i)+": v")
		}
		return hs
	}()...)
	hdr("3 KiB Authorization", okOr4xxClose, "Authorization: Bearer "+strings.Repeat("t", 3<<10))
	hdr("1,000-character X-Request-Id", okOnly, "X-Request-Id: "+strings.Repeat("i", 1000))
	hdr("X-Request-Id with spaces and quotes", okOnly, `X-Request-Id: a b "c" <d>`)
	hdr("Connection naming Content-Length", okOnly, "Connection: keep-alive, Content-Length")
	hdr("Connection naming X-Request-Id", okOnly, "Connection: X-Request-Id", "X-Request-Id: hop")
	hdr("Upgrade: h2c", okOr4xx, "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
	hdr("two Host headers", okOr4xxClose, "Host: a.invalid", "Host: b.invalid")
	hdr("NUL in a header value", okOr4xxClose, "X-Nul: a\x00b")
	hdr("space before the colon", okOr4xxClose, "X-Space : v")
	hdr("obs-fold continuation", okOr4xxClose, "X-Fold: a", " b")
	hdr("header line without a colon", okOr4xxClose, "NoColonHere")
	rawReq := func(name, raw string, e expect) {
		add(variant{kind: kindHeaders, make: func(g *hostileGen) hostile {
			return one(hostile{}, e, w([]byte(raw)))
		}}, name, 0)
	}
	vb := string(validBody(false, "framing"))
	rawReq("Content-Length not a number", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n"+vb, any4xxOrClose)
	rawReq("negative Content-Length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n"+vb, any4xxOrClose)
	rawReq("two different Content-Lengths", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(vb))+"\r\nContent-Length: 3\r\n\r\n"+vb, any4xxOrClose)
	rawReq("Content-Length overflow", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999999999999999\r\n\r\n"+vb, any4xxOrClose)
	rawReq("chunk size not hex", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"+vb+"\r\n0\r\n\r\n", any4xxOrClose)
	rawReq("chunk size overflow", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n"+vb+"\r\n0\r\n\r\n", any4xxOrClose)
	rawReq("unknown Transfer-Encoding", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n"+vb, any4xxOrClose)
	rawReq("bare LF line ends", strings.ReplaceAll(string(postJSON(completionsPath, []byte(vb))), "\r\n", "\n"), okOr4xxClose)
	rawReq("no Host", "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(vb))+"\r\n\r\n"+vb, okOr4xxClose)
	rawReq("no Content-Type", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(vb))+"\r\n\r\n"+vb, okOr4xx)
	rawReq("Content-Type text/plain", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: "+strconv.Itoa(len(vb))+"\r\n\r\n"+vb, any4xx)
	// Content-Length and Transfer-Encoding together, with a request hidden
	// after the chunked body: an answer to it would be a smuggled request
	// (RFC 9112 §6.1 wants the connection closed after the first answer).
	add(variant{kind: kindHeaders, make: func(g *hostileGen) hostile {
		smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
		raw := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" +
			string(chunked([]byte(vb), 16)) + smuggled
		h := one(hostile{}, okOr4xxClose, w([]byte(raw)))
		h.noExtra = true
		return h
	}}, "Content-Length with Transfer-Encoding, request smuggled after", 0)

	// Request line abuse.
	rl := func(name, raw string, e expect) {
		add(variant{kind: kindRequestLine, make: func(*hostileGen) hostile { return one(hostile{}, e, w([]byte(raw))) }}, name, 0)
	}
	rl("unknown method", string(request("BREW", completionsPath, []string{jsonCT}, []byte(vb))), status(405))
	rl("lower-case method", string(request("post", completionsPath, []string{jsonCT}, []byte(vb))), any4xx)
	rl("GET on a POST route", string(request("GET", completionsPath, nil, nil)), status(405))
	rl("DELETE on a GET route", string(request("DELETE", "/v1/models", nil, nil)), status(405))
	rl("TRACE", string(request("TRACE", "/", nil, nil)), any4xx)
	rl("OPTIONS *", string(request("OPTIONS", "*", nil, nil)), any4xxOrClose)
	rl("CONNECT", "CONNECT evil.invalid:443 HTTP/1.1\r\nHost: evil.invalid:443\r\n\r\n", any4xxOrClose)
	rl("unknown path", string(postJSON("/v1/engines/davinci/completions", []byte(vb))), status(404))
	rl("path with NUL escape", string(postJSON("/v1/comp%00letions", []byte(vb))), any4xx)
	rl("dot segments", string(postJSON("/v1/../v1/./completions", []byte(vb))), okOr4xx)
	rl("query string garbage", string(postJSON("/v1/completions?%zz&a=%ff&&=", []byte(vb))), okOr4xx)
	rl("absolute-form target", string(postJSON("http://evil.invalid/v1/completions", []byte(vb))), okOr4xx)
	rl("3 KiB path", string(postJSON("/v1/"+strings.Repeat("p", 3<<10), []byte(vb))), any4xx)
	rl("64 KiB path", string(postJSON("/v1/"+strings.Repeat("p", 64<<10), []byte(vb))), any4xxOrClose)
	rl("HTTP/1.0", strings.Replace(string(postJSON(completionsPath, []byte(vb))), "HTTP/1.1", "HTTP/1.0", 1), okOnly)
	rl("HTTP/2.0 in an HTTP/1 request line", strings.Replace(string(postJSON(completionsPath, []byte(vb))), "HTTP/1.1", "HTTP/2.0", 1), okOr4xxClose)
	rl("HTTP/9.9", strings.Replace(string(postJSON(completionsPath, []byte(vb))), "HTTP/1.1", "HTTP/9.9", 1), okOr4xxClose)
	rl("HTTP/0.9 request", "GET /health\r\n\r\n", any4xxOrClose)
	rl("no version", "GET /health HTTP/\r\nHost: x\r\n\r\n", any4xxOrClose)
	rl("h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", any4xxOrClose)
	rl("TLS hello on the plain port", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"+strings.Repeat("\x00", 32)+"\r\n\r\n", any4xxOrClose)
	add(variant{kind: kindRequestLine, make: func(g *hostileGen) hostile {
		b := make([]byte, 1+g.rng.IntN(200))
		for i := range b {
			b[i] = byte(' ' + g.rng.IntN(95))
		}
		return one(hostile{}, any4xxOrClose, w(append(b, "\r\n\r\n"...)))
	}}, "garbage request line", 0)
	add(variant{kind: kindRequestLine, make: func(g *hostileGen) hostile {
		return one(hostile{}, expect{ok: true, no4xx: true, head: true}, w(request("HEAD", "/v1/models", nil, nil)))
	}}, "HEAD /v1/models", 0)

	// Slowloris: the server's read timeout (server.request_timeout) must
	// end each of these with a 408 or a close.
	slow := func(name string, e expect, steps func() []step) {
		add(variant{kind: kindSlowloris, make: func(*hostileGen) hostile { return one(hostile{}, e, steps()...) }}, name, sz.SlowN)
	}
	slow("body dripping a byte every 300 ms", statusOrClose(408), func() []step {
		b := validBody(false, fill(900))
		head := request("POST", completionsPath, []string{jsonCT, "Content-Length: " + strconv.Itoa(len(b))}, nil)
		return []step{w(append(head, b[:20]...)), {write: b[20:], drip: 300 * time.Millisecond}}
	})
	slow("headers dripping a byte every 300 ms", statusOrClose(408), func() []step {
		return []step{w([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\n")), {write: []byte("X-Slow: " + strings.Repeat("s", 4000)), drip: 300 * time.Millisecond}}
	})
	slow("body announced, never sent", statusOrClose(408), func() []step {
		return []step{w(request("POST", completionsPath, []string{jsonCT, "Content-Length: 100"}, nil)), {write: []byte("x"), drip: time.Minute}}
	})
	slow("chunked body never finished", statusOrClose(408), func() []step {
		c := chunked(validBody(false, "never finished"), 8)
		c = c[:len(c)-5] // no last chunk
		return []step{w(request("POST", completionsPath, []string{jsonCT, "Transfer-Encoding: chunked"}, c)), {write: []byte("x"), drip: time.Minute}}
	})

	// One-byte chunks: a big body in chunked encoding, every chunk one byte
	// (six bytes on the wire each).
	add(measured(heavy(kindOneByte, any4xx, func() []byte {
		b := chunked(validBody(false, fill(sz.OneByte-64)), 1)
		return request("POST", completionsPath, []string{jsonCT, "Transfer-Encoding: chunked"}, b)
	})), fmt.Sprintf("%d MiB body", sz.OneByte>>20), sz.OneByteN)

	// Pipelining: several requests in one write, answered in order.
	pipe := func(name string, reqs func(g *hostileGen) ([][]byte, []expect), split bool) {
		add(variant{kind: kindPipelining, make: func(g *hostileGen) hostile {
			rs, es := reqs(g)
			all := bytes.Join(rs, nil)
			h := hostile{want: es}
			if !split {
				h.steps = []step{w(all)}
				return h
			}
			for len(all) > 0 {
				k := min(len(all), 1+g.rng.IntN(100))
				h.steps = append(h.steps, w(all[:k]))
				all = all[k:]
			}
			return h
		}}, name, 0)
	}
	validPipe := func(n int) func(g *hostileGen) ([][]byte, []expect) {
		return func(g *hostileGen) ([][]byte, []expect) {
			var rs [][]byte
			var es []expect
			for range n {
				id := g.nextID()
				rs = append(rs, postJSON(completionsPath, validBody(false, "pipelined "+id), "X-Request-Id: "+id))
				es = append(es, expect{ok: true, no4xx: true, id: id})
			}
			return rs, es
		}
	}
	pipe("8 valid requests in one write", validPipe(8), false)
	pipe("8 valid requests split at random points", validPipe(8), true)
	pipe("valid and invalid mixed", func(g *hostileGen) ([][]byte, []expect) {
		var rs [][]byte
		var es []expect
		okReq := func() {
			id := g.nextID()
			rs = append(rs, postJSON(completionsPath, validBody(false, "mixed "+id), "X-Request-Id: "+id))
			es = append(es, expect{ok: true, no4xx: true, id: id})
		}
		okReq()
		rs, es = append(rs, postJSON(completionsPath, []byte(`{"model":`))), append(es, status(400))
		okReq()
		rs, es = append(rs, request("GET", completionsPath, nil, nil)), append(es, status(405))
		okReq()
		rs, es = append(rs, postJSON("/v1/nothing", []byte(vb))), append(es, status(404))
		okReq()
		return rs, es
	}, false)
	pipe("valid requests then broken HTTP", func(g *hostileGen) ([][]byte, []expect) {
		rs, es := validPipe(3)(g)
		return append(rs, []byte("NOT HTTP AT ALL\r\n\r\n")), append(es, any4xxOrClose)
	}, false)
	pipe("50 GET /health", func(*hostileGen) ([][]byte, []expect) {
		var rs [][]byte
		var es []expect
		for range 50 {
			rs = append(rs, request("GET", "/health", nil, nil))
			es = append(es, okOnly)
		}
		return rs, es
	}, false)

	// Expect abuse.
	exp := func(name string, e expect, steps func() []step) {
		add(variant{kind: kindExpect, make: func(*hostileGen) hostile { return one(hostile{}, e, steps()...) }}, name, 0)
	}
	expHead := func(method, path string, bodyLen int, extra ...string) []byte {
		return request(method, path, append([]string{jsonCT, "Content-Length: " + strconv.Itoa(bodyLen)}, extra...), nil)
	}
	ev := []byte(vb)
	exp("100-continue, body after the 100", okOnly, func() []step {
		return []step{{write: expHead("POST", completionsPath, len(ev), "Expect: 100-continue"), await100: true}, w(ev)}
	})
	exp("100-continue, body at once", okOnly, func() []step {
		return []step{w(append(expHead("POST", completionsPath, len(ev), "Expect: 100-continue"), ev...))}
	})
	exp("100-continue over server.max_body_bytes", statusOrClose(413, 417), func() []step {
		return []step{{write: expHead("POST", completionsPath, sz.MaxBody+1, "Expect: 100-continue"), await100: true}}
	})
	exp("100-continue to an unknown path", statusOrClose(404, 417), func() []step {
		return []step{{write: expHead("POST", "/v1/nothing", len(ev), "Expect: 100-continue"), await100: true}}
	})
	exp("100-continue with the wrong method", statusOrClose(405, 417), func() []step {
		return []step{{write: expHead("PUT", completionsPath, len(ev), "Expect: 100-continue"), await100: true}}
	})
	exp("unknown expectation", expect{ok: true, statuses: []int{417}}, func() []step {
		return []step{w(append(expHead("POST", completionsPath, len(ev), "Expect: 200-ok"), ev...))}
	})
	exp("Expect twice", expect{ok: true, statuses: []int{417}}, func() []step {
		return []step{w(append(expHead("POST", completionsPath, len(ev), "Expect: 100-continue", "Expect: 100-continue"), ev...))}
	})
	exp("100-continue on HTTP/1.0", okOnly, func() []step {
		r := bytes.Replace(append(expHead("POST", completionsPath, len(ev), "Expect: 100-continue"), ev...), []byte("HTTP/1.1"), []byte("HTTP/1.0"), 1)
		return []step{w(r)}
	})
	exp("100-continue, body never sent", statusOrClose(408), func() []step {
		return []step{{write: expHead("POST", completionsPath, len(ev), "Expect: 100-continue"), await100: true}, {write: []byte("x"), drip: time.Minute}}
	})
	return vs
}
