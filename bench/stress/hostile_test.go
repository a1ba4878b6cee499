package stress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// testSizes keep the heavy variants small enough for a unit test.
var testSizes = hostileSizes{MaxBody: 1 << 20, Deep: 500, OneByte: 64 << 10, OneByteN: 2, HeavyN: 2, SlowN: 3}

// readRequests parses every request in wire as a server would, with
// net/http's parser, and returns them with their bodies read.
func readRequests(t *testing.T, wire []byte) ([]*http.Request, [][]byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	var reqs []*http.Request
	var bodies [][]byte
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return reqs, bodies
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("request %d does not parse: %v", len(reqs)+1, err)
		}
		b, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("request %d body: %v", len(reqs)+1, err)
		}
		reqs, bodies = append(reqs, req), append(bodies, b)
	}
}

func TestHostileCasesCountAndKinds(t *testing.T) {
	cases := hostileCases(1, 3000, testSizes)
	requests := 0
	kinds := map[string]int{}
	names := map[string]int{}
	for _, h := range cases {
		if h.kind == "" || h.name == "" || len(h.want) == 0 {
			t.Fatalf("case without kind, name or answers: %+v", h)
		}
		requests += len(h.want)
		kinds[h.kind] += len(h.want)
		names[h.kind+"/"+h.name]++
	}
	if requests < 3000 {
		t.Fatalf("%d requests, want at least 3000", requests)
	}
	for _, k := range hostileKinds {
		if kinds[k] == 0 {
			t.Errorf("no %s requests", k)
		}
	}
	// Bounded variants stay within their bounds.
	for name, n := range names {
		switch {
		case strings.Contains(name, "one-byte"):
			if n != testSizes.OneByteN {
				t.Errorf("%s: %d, want %d", name, n, testSizes.OneByteN)
			}
		case strings.HasPrefix(name, kindHugeJSON+"/") && strings.Contains(name, "max_body_bytes"):
			if n != testSizes.HeavyN {
				t.Errorf("%s: %d, want %d", name, n, testSizes.HeavyN)
			}
		case strings.HasPrefix(name, kindSlowloris):
			if n != testSizes.SlowN {
				t.Errorf("%s: %d, want %d", name, n, testSizes.SlowN)
			}
		}
	}
}

func TestHostileCasesDeterministic(t *testing.T) {
	a, b := hostileCases(7, 500, testSizes), hostileCases(7, 500, testSizes)
	if len(a) != len(b) {
		t.Fatalf("%d and %d cases from one seed", len(a), len(b))
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].wire(), b[i].wire()) || !reflect.DeepEqual(a[i].want, b[i].want) {
			t.Fatalf("case %d differs: %s and %s", i, a[i].name, b[i].name)
		}
	}
	c := hostileCases(8, 500, testSizes)
	same := 0
	for i := range min(len(a), len(c)) {
		if bytes.Equal(a[i].wire(), c[i].wire()) {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("another seed gave the same cases")
	}
}

// Body-level kinds are well-framed HTTP: the hostility is in the body, as
// the kind says.
func TestHostileBodiesAreWhatTheyClaim(t *testing.T) {
	seen := map[string]bool{}
	for _, h := range hostileCases(3, 2000, testSizes) {
		switch h.kind {
		case kindBrokenJSON, kindWrongTypes, kindDeepJSON, kindBadUTF8, kindHugeJSON, kindOneByte:
		default:
			continue
		}
		if h.kind == kindBadUTF8 && (strings.Contains(h.name, "X-Request-Id") || strings.Contains(h.name, "path")) {
			// Not in the body; checked below.
			if utf8.Valid(h.wire()) {
				t.Errorf("%s: wire is valid UTF-8", h.name)
			}
			continue
		}
		if strings.HasPrefix(h.name, "over server.max_body_bytes") {
			continue // framing is fine, but too long for this parser's taste; checked in TestHostileSizes
		}
		reqs, bodies := readRequests(t, h.wire())
		if len(reqs) != 1 {
			t.Fatalf("%s: %d requests, want 1", h.name, len(reqs))
		}
		body := bodies[0]
		seen[h.kind] = true
		switch h.kind {
		case kindBrokenJSON:
			if json.Valid(body) {
				t.Errorf("%s: body is valid JSON: %q", h.name, trim(body, 80))
			}
		case kindWrongTypes:
			if !json.Valid(body) {
				t.Errorf("%s: body is not valid JSON: %q", h.name, trim(body, 80))
			}
		case kindBadUTF8:
			if utf8.Valid(body) {
				t.Errorf("%s: body is valid UTF-8: %q", h.name, trim(body, 80))
			}
		case kindDeepJSON:
			if d := strings.Count(string(body), "[") + strings.Count(string(body), "{"); d < testSizes.Deep {
				t.Errorf("%s: %d open brackets, want at least %d", h.name, d, testSizes.Deep)
			}
		case kindOneByte:
			if len(body) < testSizes.OneByte-128 || len(body) > testSizes.OneByte {
				t.Errorf("%s: body of %d bytes, want about %d", h.name, len(body), testSizes.OneByte)
			}
			if !json.Valid(body) {
				t.Errorf("%s: body is not valid JSON", h.name)
			}
		}
	}
	for _, k := range []string{kindBrokenJSON, kindWrongTypes, kindDeepJSON, kindBadUTF8, kindHugeJSON, kindOneByte} {
		if !seen[k] {
			t.Errorf("no %s case checked", k)
		}
	}
}

func TestHostileSizes(t *testing.T) {
	for _, h := range hostileCases(4, 100, testSizes) {
		wire := h.wire()
		switch {
		case h.name == "prompt just under server.max_body_bytes":
			_, bodies := readRequests(t, wire)
			if n := len(bodies[0]); n >= testSizes.MaxBody || n < testSizes.MaxBody-(2<<20) {
				t.Errorf("%s: %d bytes for a limit of %d", h.name, n, testSizes.MaxBody)
			}
		case strings.HasPrefix(h.name, "over server.max_body_bytes, chunked"):
			head, rest, _ := bytes.Cut(wire, []byte("\r\n\r\n"))
			if !bytes.Contains(head, []byte("Transfer-Encoding: chunked")) {
				t.Errorf("%s: not chunked", h.name)
			}
			body, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(rest)))
			if err != nil || len(body) <= testSizes.MaxBody {
				t.Errorf("%s: %d bytes (%v), want over %d", h.name, len(body), err, testSizes.MaxBody)
			}
		case strings.HasPrefix(h.name, "over server.max_body_bytes"):
			_, rest, _ := bytes.Cut(wire, []byte("\r\n\r\n"))
			if len(rest) <= testSizes.MaxBody {
				t.Errorf("%s: %d bytes, want over %d", h.name, len(rest), testSizes.MaxBody)
			}
		case h.kind == kindOneByte:
			// Every chunk is one byte: "1\r\n", the byte, "\r\n".
			_, rest, _ := bytes.Cut(wire, []byte("\r\n\r\n"))
			chunks := 0
			for len(rest) > len("0\r\n\r\n") {
				if len(rest) < 6 || rest[0] != '1' || string(rest[1:3]) != "\r\n" || string(rest[4:6]) != "\r\n" {
					t.Fatalf("%s: chunk %d is not one byte: %q", h.name, chunks, trim(rest, 12))
				}
				rest = rest[6:]
				chunks++
			}
			if string(rest) != "0\r\n\r\n" || chunks < testSizes.OneByte-128 {
				t.Errorf("%s: %d one-byte chunks, then %q", h.name, chunks, rest)
			}
		}
	}
}

func TestHostilePipelines(t *testing.T) {
	checked := 0
	for _, h := range hostileCases(5, 1000, testSizes) {
		if h.kind != kindPipelining || strings.Contains(h.name, "broken HTTP") {
			continue
		}
		reqs, _ := readRequests(t, h.wire())
		if len(reqs) != len(h.want) || len(reqs) < 2 {
			t.Fatalf("%s: %d requests for %d answers", h.name, len(reqs), len(h.want))
		}
		for i, r := range reqs {
			if id := h.want[i].id; id != "" && r.Header.Get("X-Request-Id") != id {
				t.Errorf("%s: request %d has id %q, its answer wants %q", h.name, i, r.Header.Get("X-Request-Id"), id)
			}
		}
		if strings.Contains(h.name, "split") && len(h.steps) < 2 {
			t.Errorf("%s: one write", h.name)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no pipelining case")
	}
}

func TestHostileSlowOnesDrip(t *testing.T) {
	n := 0
	for _, h := range hostileCases(6, 1000, testSizes) {
		if h.kind == kindSlowloris && !h.slow() {
			t.Errorf("%s: never waits", h.name)
		}
		if h.slow() {
			n++
			for _, e := range h.want {
				if e.ok {
					t.Errorf("%s: a slow exchange that may be served", h.name)
				}
			}
		}
	}
	if n < 4*testSizes.SlowN {
		t.Errorf("%d slow exchanges, want at least %d", n, 4*testSizes.SlowN)
	}
}

func TestChunked(t *testing.T) {
	f := func(body string, n int) {
		t.Helper()
		got, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(chunked([]byte(body), n))))
		if err != nil || string(got) != body {
			t.Errorf("chunked(%q, %d) decodes to %q, %v", body, n, got, err)
		}
	}
	f("", 1)
	f("a", 1)
	f("hello world", 1)
	f("hello world", 4)
	f(strings.Repeat("x", 1000), 64)
	if got := string(chunked([]byte("abc"), 2)); got != "2\r\nab\r\n1\r\nc\r\n0\r\n\r\n" {
		t.Errorf("chunked(abc, 2) = %q", got)
	}
}

func TestExpectCheck(t *testing.T) {
	jsonErr := func(status int, body string) reply {
		return reply{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
	}
	good := jsonErr(400, `{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`)
	f := func(e expect, r reply, ok bool) {
		t.Helper()
		if err := e.check(&r); (err == nil) != ok {
			t.Errorf("check(%+v, %d %s) = %v, want ok %v", e, r.status, r.body, err, ok)
		}
	}
	f(any4xx, good, true)
	f(status(400), good, true)
	f(status(413), good, false)
	f(okOnly, good, false)
	f(okOr4xx, good, true)
	f(any4xx, jsonErr(400, `{"error":{"message":"bad","type":"x","param":"model","code":400}}`), true)
	f(any4xx, jsonErr(400, `{"error":{"message":"bad","type":"x","param":null,"code":404}}`), false)
	f(any4xx, jsonErr(400, `{"error":{"type":"x","code":400}}`), false)
	f(any4xx, jsonErr(400, `{"error":{"message":"m","type":"x","param":3,"code":400}}`), false)
	f(any4xx, jsonErr(400, `{"detail":"bad"}`), false)
	f(any4xx, jsonErr(400, "{\"error\":{\"message\":\"\xff\",\"type\":\"x\",\"code\":400}}"), false)
	f(any4xx, reply{status: 417, header: http.Header{}}, false)
	f(expect{head: true}, reply{status: 405, header: http.Header{}}, true)
	f(any4xx, jsonErr(500, `{"error":{"message":"boom","type":"x","param":null,"code":500}}`), false)
	f(okOr4xxClose, jsonErr(502, `{}`), false)
	ok := reply{status: 200, header: http.Header{"X-Request-Id": {"hostile-1"}}, body: []byte(`{}`)}
	f(okOnly, ok, true)
	f(any4xx, ok, false)
	f(expect{ok: true, id: "hostile-1"}, ok, true)
	f(expect{ok: true, id: "hostile-2"}, ok, false)
	f(okOnly, reply{status: 200, header: http.Header{"X-Request-Id": {"bad id"}}}, false)
	f(okOnly, reply{status: 302, header: http.Header{}}, false)
}

func TestJudge(t *testing.T) {
	good := reply{status: 400, header: http.Header{"Content-Type": {"application/json"}},
		body: []byte(`{"error":{"message":"bad","type":"x","param":null,"code":400}}`)}
	f := func(h hostile, ex exchange, wantBad int) {
		t.Helper()
		if bad := h.judge(ex); len(bad) != wantBad {
			t.Errorf("judge(%v, %+v) = %q, want %d problems", h.want, ex, bad, wantBad)
		}
	}
	f(hostile{want: []expect{any4xx}}, exchange{replies: []reply{good}}, 0)
	f(hostile{want: []expect{any4xx}}, exchange{closed: true}, 1)
	f(hostile{want: []expect{any4xxOrClose}}, exchange{closed: true}, 0)
	f(hostile{want: []expect{any4xxOrClose}}, exchange{timedOut: true}, 1)
	// Pipelined: answered, then closed where a close is allowed.
	f(hostile{want: []expect{any4xx, any4xxOrClose}}, exchange{replies: []reply{good}, closed: true}, 0)
	f(hostile{want: []expect{any4xx, any4xx, any4xx}}, exchange{replies: []reply{good}, closed: true}, 1)
	f(hostile{want: []expect{any4xx}, noExtra: true}, exchange{replies: []reply{good}, extra: true}, 1)
}

func TestValidID(t *testing.T) {
	f := func(id string, want bool) {
		t.Helper()
		if validID(id) != want {
			t.Errorf("validID(%q) = %v", id, !want)
		}
	}
	f("hostile-1", true)
	f("a:b/c+d=e~f@g_h.i", true)
	f("", false)
	f("a b", false)
	f(strings.Repeat("i", 128), true)
	f(strings.Repeat("i", 129), false)
	f("id-\xff", false)
}
