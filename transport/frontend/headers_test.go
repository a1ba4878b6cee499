package frontend

import (
	"bufio"
	"bytes"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// inNames is headerSet.has the slow way: key against every name.
func inNames(key []byte, names []string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func headerKeys(all iter.Seq2[[]byte, []byte]) []string {
	var keys []string
	for k, v := range all {
		keys = append(keys, strings.ToLower(string(k))+"="+string(v))
	}
	slices.Sort(keys)
	return keys
}

func TestCopyRequestHeaders(t *testing.T) {
	var src, dst fasthttp.RequestHeader
	raw := "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nconnection: keep-alive, X-Secret\r\n" +
		"KEEP-ALIVE: timeout=5\r\nx-secret: 1\r\nTE: trailers\r\nExpect: 100-continue\r\nX-Request-Id: abc\r\n" +
		"Authorization: Bearer k\r\nX-Session-Id: s1\r\nTraceparent: 00-1-2-01\r\nContent-Type: application/json\r\n\r\n"
	if err := src.Read(bufioReader(raw)); err != nil {
		t.Fatal(err)
	}
	copyRequestHeaders(&dst, &src)
	got := headerKeys(dst.All())
	for _, k := range got {
		name, _, _ := strings.Cut(k, "=")
		switch name {
		case "host", "content-length":
			continue // fasthttp's own, not copied: the caller sets them
		case "connection", "keep-alive", "x-secret", "te", "expect", "x-request-id":
			t.Errorf("%s was forwarded", k)
		}
	}
	for _, want := range []string{"authorization=Bearer k", "x-session-id=s1", "traceparent=00-1-2-01", "content-type=application/json"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s was not forwarded; forwarded: %v", want, got)
		}
	}
}

func TestCopyResponseHeaders(t *testing.T) {
	var src, dst fasthttp.ResponseHeader
	raw := "HTTP/1.1 200 OK\r\nServer: uvicorn\r\nDate: Wed, 02 Dec 2026 14:00:00 GMT\r\nContent-Length: 5\r\n" +
		"Connection: x-hop\r\nX-Hop: 1\r\nkeep-alive: timeout=5\r\nTrailer: X-Sum\r\nx-request-id: engine\r\nContent-Type: text/event-stream\r\n" +
		"X-Engine: vllm\r\n\r\n"
	if err := src.Read(bufioReader(raw)); err != nil {
		t.Fatal(err)
	}
	copyResponseHeaders(&dst, &src)
	got := headerKeys(dst.All())
	for _, k := range got {
		name, _, _ := strings.Cut(k, "=")
		switch name {
		case "x-hop", "keep-alive", "trailer", "x-request-id", "date", "connection":
			t.Errorf("%s was passed on", k)
		case "server":
			if k != "server=" && strings.Contains(k, "uvicorn") {
				t.Errorf("the engine's %s was passed on", k)
			}
		}
	}
	if string(dst.ContentType()) != "text/event-stream" {
		t.Errorf("Content-Type %q, want the engine's", dst.ContentType())
	}
	if !slices.Contains(got, "x-engine=vllm") {
		t.Errorf("X-Engine was not passed on: %v", got)
	}
}

// TestHeaderSetMatchesNames: the length-filed sets answer as comparing
// with every name does, in any case.
func TestHeaderSetMatchesNames(t *testing.T) {
	for _, set := range []struct {
		s     *headerSet
		names []string
	}{{requestDropped, requestDropNames}, {responseDropped, responseDropNames}} {
		for _, n := range append(set.names, "Content-Type", "User-Agent", "Accept", "", "Hostx", strings.Repeat("a", 40)) {
			for _, k := range []string{n, strings.ToUpper(n), strings.ToLower(n)} {
				if got, want := set.s.has([]byte(k)), inNames([]byte(k), set.names); got != want {
					t.Errorf("has(%q) = %v, want %v", k, got, want)
				}
			}
		}
	}
}

func FuzzHeaderSet(f *testing.F) {
	for _, n := range requestDropNames {
		f.Add([]byte(n))
	}
	f.Add([]byte("X-Request-ID"))
	f.Add([]byte("\xff\xfeHost"))
	f.Fuzz(func(t *testing.T, key []byte) {
		if got, want := requestDropped.has(key), inNames(key, requestDropNames); got != want {
			t.Fatalf("request set: has(%q) = %v, want %v", key, got, want)
		}
		if got, want := responseDropped.has(key), inNames(key, responseDropNames); got != want {
			t.Fatalf("response set: has(%q) = %v, want %v", key, got, want)
		}
	})
}

func BenchmarkCopyRequestHeaders(b *testing.B) {
	var src, dst fasthttp.RequestHeader
	raw := "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:18180\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 120\r\n" +
		"Content-Type: application/json\r\nAccept-Encoding: gzip\r\nAuthorization: Bearer sk-1\r\n\r\n"
	if err := src.Read(bufioReader(raw)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		dst.Reset()
		copyRequestHeaders(&dst, &src)
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
