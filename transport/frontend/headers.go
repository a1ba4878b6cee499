package frontend

import (
	"bytes"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"
)

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 §7.6.1), plus the ones the proxy sets itself.
var hopByHop = [...]string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// headerSet is a set of header names, matched ASCII case-insensitively.
// The names are filed by length, so that a key is compared with the one or
// two names of its length rather than with all of them: the filter runs on
// every header of every request and response.
type headerSet [24][][]byte

func newHeaderSet(names ...string) *headerSet {
	var s headerSet
	for _, n := range names {
		s[len(n)] = append(s[len(n)], []byte(n))
	}
	return &s
}

func (s *headerSet) has(key []byte) bool {
	if len(key) >= len(s) {
		return false
	}
	for _, n := range s[len(key)] {
		if bytes.EqualFold(key, n) {
			return true
		}
	}
	return false
}

// requestDropNames are the client's headers not forwarded to the engine:
// the hop-by-hop ones, and Host, Content-Length, X-Request-Id (which the
// caller sets) and Expect (the gateway has read the whole body already).
// responseDropNames are the engine's headers not passed to the client: the
// hop-by-hop ones, the body framing (fasthttp's to set), Server and Date
// (the gateway's own) and X-Request-Id (set for the client already).
var (
	requestDropNames  = append(hopByHop[:], "Host", "Content-Length", "X-Request-Id", "Expect")
	responseDropNames = append(hopByHop[:], "Content-Length", "Server", "Date", "X-Request-Id")
	requestDropped    = newHeaderSet(requestDropNames...)
	responseDropped   = newHeaderSet(responseDropNames...)
)

// listed reports whether key is one of the names a Connection header
// declares hop-by-hop (connection is its value).
func listed(key, connection []byte) bool {
	for len(connection) > 0 {
		var tok []byte
		tok, connection, _ = bytes.Cut(connection, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(tok), key) {
			return true
		}
	}
	return false
}

// copyRequestHeaders copies the client's end-to-end headers to the upstream
// request. Host, Content-Length and X-Request-Id are set by the caller.
func copyRequestHeaders(dst *fasthttp.RequestHeader, src *fasthttp.RequestHeader) {
	conn := src.Peek("Connection")
	for key, value := range src.All() {
		if requestDropped.has(key) || listed(key, conn) {
			continue
		}
		dst.AddBytesKV(key, value)
	}
}

// copyResponseHeaders copies the engine's end-to-end headers to the client
// response. The body framing is fasthttp's to set.
func copyResponseHeaders(dst *fasthttp.ResponseHeader, src *fasthttp.ResponseHeader) {
	conn := src.Peek("Connection")
	for key, value := range src.All() {
		switch {
		case responseDropped.has(key) || listed(key, conn):
			continue
		case bytes.EqualFold(key, []byte("Content-Type")):
			dst.SetContentTypeBytes(value)
			continue
		}
		dst.AddBytesKV(key, value)
	}
}

// ValidRequestID reports whether a client's x-request-id can be passed on
// as it is: 1 to 128 characters that are safe in a header, a log line and a
// response id.
func ValidRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '~' || c == '@' || c == '/' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// requestCarrier lets tracing read a client's trace context (traceparent,
// tracestate) and write the gateway's into the request to the engine.
type requestCarrier struct{ h *fasthttp.RequestHeader }

var _ propagation.TextMapCarrier = requestCarrier{}

func (c requestCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c requestCarrier) Set(key, value string) { c.h.Set(key, value) }

func (c requestCarrier) Keys() []string {
	keys := make([]string, 0, c.h.Len())
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}

// The response headers that say how a request was routed, in both modes
// (the front end's and the endpoint picker's). Lower case, as ext_proc
// carries headers; fasthttp writes them in its canonical case.
const (
	HeaderReplica      = "x-inferrail-replica"       // the replica that served
	HeaderPolicy       = "x-inferrail-policy"        // the policy that chose it
	HeaderPromptTokens = "x-inferrail-prompt-tokens" // the prompt's tokens, as the gateway counted them
	HeaderCachedTokens = "x-inferrail-cached-tokens" // the cached tokens the gateway predicted there
)
