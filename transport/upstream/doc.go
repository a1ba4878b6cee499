// Package upstream is the gateway's HTTP/1.1 client to engine replicas (vLLM,
// SGLang, the simulator in sim/).
//
// A Pool talks to one replica. It owns its TCP connections: it dials them,
// keeps a bounded stack of idle keep-alive ones, writes requests and parses
// responses with fasthttp's Request and Response types over those
// connections. Owning the connection is the point of the package: fasthttp's
// own clients cannot be interrupted while they wait for a response head
// (../shared/reference/go-stack.md §3), and an engine only frees a request's
// slot when it sees its client's connection close. Here a request is
// cancelled at any moment, connecting, waiting for the head or streaming the
// body, by cancelling its context, which closes its connection.
//
// Do returns once the response head has arrived; the Response then streams the
// body as the engine sends it, each read returning what has arrived so far, so
// an SSE event reaches the caller as soon as the engine flushes it.
//
// upstream makes no routing or retry decision beyond one transparent retry of
// a stale keep-alive connection; it classifies errors (DialError, ClosedError,
// ErrHeadTimeout, context errors) so that transport/frontend can. Each Pool
// runs one goroutine, the idle-connection reaper, which Close stops and joins;
// cancellation uses context.AfterFunc, so a request costs no goroutine unless
// its context is cancelled.
package upstream
