package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/transport/sockio"
)

// Options configure a Pool. A zero field takes its default.
type Options struct {
	// DialTimeout bounds connecting to the replica (default 2s). A replica that
	// does not accept in time gives a DialError, and the request goes elsewhere.
	DialTimeout time.Duration
	// MaxIdleConns is how many keep-alive connections the pool keeps for
	// reuse (default 64). More may be open while requests run; a connection
	// released when the stack is full is closed.
	MaxIdleConns int
	// IdleTimeout closes a connection idle this long (default 4s). vLLM's
	// uvicorn closes keep-alive connections idle for 5 s
	// (VLLM_HTTP_TIMEOUT_KEEP_ALIVE); closing ours first avoids sending a
	// request into a connection the engine is closing.
	IdleTimeout time.Duration
	// HeadTimeout bounds the wait for the response head after the request is
	// written (default 0: none, the request's context alone bounds it). On
	// expiry the connection is closed and Do returns ErrHeadTimeout.
	HeadTimeout time.Duration
	// MaxResponseHeaderBytes is the largest response head accepted, and the
	// size of each connection's read buffer (default 8 KiB).
	MaxResponseHeaderBytes int64
	// TLS is used for an https:// replica (default: the system's roots,
	// TLS 1.2 and up); its ServerName defaults to the URL's host. The
	// handshake is part of the dial: bounded by DialTimeout, and a failed
	// one is a DialError.
	TLS *tls.Config
}

const (
	defaultDialTimeout            = 2 * time.Second
	defaultMaxIdleConns           = 64
	defaultIdleTimeout            = 4 * time.Second
	defaultMaxResponseHeaderBytes = 8 << 10
)

func (o *Options) setDefaults() error {
	var errs []error
	if o.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("dial timeout %v: negative", o.DialTimeout))
	}
	if o.MaxIdleConns < 0 {
		errs = append(errs, fmt.Errorf("max idle conns %d: negative", o.MaxIdleConns))
	}
	if o.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v: negative", o.IdleTimeout))
	}
	if o.HeadTimeout < 0 {
		errs = append(errs, fmt.Errorf("head timeout %v: negative", o.HeadTimeout))
	}
	if o.MaxResponseHeaderBytes < 0 || o.MaxResponseHeaderBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("max response header bytes %d: want 0 to 1 MiB", o.MaxResponseHeaderBytes))
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.MaxIdleConns == 0 {
		o.MaxIdleConns = defaultMaxIdleConns
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = defaultIdleTimeout
	}
	if o.MaxResponseHeaderBytes == 0 {
		o.MaxResponseHeaderBytes = defaultMaxResponseHeaderBytes
	}
	return errors.Join(errs...)
}

// Stats are a Pool's counters.
type Stats struct {
	Dials        uint64 // connections dialled successfully
	DialErrors   uint64 // dials that failed (not counting cancelled ones)
	StaleRetries uint64 // requests retried once because a reused connection was dead
	Idle         int    // keep-alive connections waiting for a request
}

// Pool is a keep-alive HTTP/1.1 client to one replica. It is safe for
// concurrent use.
type Pool struct {
	addr   string // host:port, dialled
	host   []byte // Host header for requests that carry none
	opts   Options
	dialer net.Dialer
	tls    *tls.Config // nil for http://

	mu     sync.Mutex // guards idle and closed
	idle   []*conn    // LIFO: the most recently used on top, the oldest at 0
	closed bool

	dials, dialErrors, staleRetries atomic.Uint64

	stop chan struct{} // closed by Close, stops the reaper
	wg   sync.WaitGroup
}

// NewPool returns a Pool for the replica at baseURL ("http://host:port" or
// "https://host:port"). It dials nothing yet. Base paths are not supported.
func NewPool(baseURL string, opts Options) (*Pool, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("upstream %s: %w", baseURL, err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("upstream %s: want http://host[:port] or https://host[:port]", baseURL)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	var tc *tls.Config
	if u.Scheme == "https" {
		if opts.TLS != nil {
			tc = opts.TLS.Clone()
		} else {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tc.ServerName == "" {
			tc.ServerName = u.Hostname()
		}
	}
	p := &Pool{
		addr:   addr,
		host:   []byte(u.Host),
		opts:   opts,
		dialer: net.Dialer{Timeout: opts.DialTimeout},
		tls:    tc,
		stop:   make(chan struct{}),
	}
	p.wg.Go(p.reap)
	return p, nil
}

// Addr is the replica's host:port.
func (p *Pool) Addr() string { return p.addr }

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	return Stats{Dials: p.dials.Load(), DialErrors: p.dialErrors.Load(),
		StaleRetries: p.staleRetries.Load(), Idle: idle}
}

// Close closes the idle connections and stops and joins the reaper. Requests
// in flight go on; their connections are closed when their Responses are.
// To abort them, cancel their contexts. Do fails with ErrClosed afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	for _, c := range idle {
		c.close()
	}
}

// Do sends req to the replica and returns once the response head has
// arrived. The caller must Close the Response, and keeps req: Do neither
// retains nor releases it (but sets its Host header to the replica's when it
// has none).
//
// Cancelling ctx at any moment, before or after Do returns, closes the
// connection: Do or a blocked Response.Read returns at once with an error
// wrapping ctx.Err() and its cause, and the engine sees its client go.
//
// If a reused keep-alive connection turns out dead before any response byte
// arrives, Do retries once on a fresh connection (not for a request whose body
// is a stream, which cannot be written twice). Errors: *DialError, *ClosedError,
// ErrHeadTimeout, ErrClosed, the context's, and for a malformed response head a
// plain error.
func (p *Pool) Do(ctx context.Context, req *fasthttp.Request) (*Response, error) {
	if ctx.Err() != nil {
		return nil, ctxError(p.addr, ctx)
	}
	if len(req.Header.Host()) == 0 && len(req.URI().Host()) == 0 {
		req.Header.SetHostBytes(p.host)
		req.UseHostHeader = true
	}
	for fresh := false; ; fresh = true {
		c, err := p.get(ctx, fresh)
		if err != nil {
			return nil, err
		}
		resp, stale, err := p.roundTrip(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		if !stale || fresh || req.IsBodyStream() || ctx.Err() != nil {
			return nil, err
		}
		p.staleRetries.Add(1)
	}
}

// roundTrip writes req on c and reads the response head. On error c is
// closed, and stale reports that c was a reused connection that ended before
// any response byte.
func (p *Pool) roundTrip(ctx context.Context, c *conn, req *fasthttp.Request) (_ *Response, stale bool, _ error) {
	c.nread, c.rerr = 0, nil
	stop := onCancel(ctx, c.closeFn)
	fail := func(err error) (*Response, bool, error) {
		stop.clear()
		c.close()
		if ctx.Err() != nil {
			return nil, false, ctxError(p.addr, ctx)
		}
		if c.nread == 0 && !errors.Is(err, ErrHeadTimeout) {
			return nil, c.reused, &ClosedError{Addr: p.addr, Err: err}
		}
		return nil, false, fmt.Errorf("upstream %s: %w", p.addr, err)
	}

	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		// A write error on a socket means the peer has gone; an error from
		// req itself (no Host, a failing body stream) is no fault of the conn.
		var ne net.Error
		if !errors.As(err, &ne) {
			stop.clear()
			c.close()
			return nil, false, fmt.Errorf("upstream %s: write request: %w", p.addr, err)
		}
		return fail(fmt.Errorf("write request: %w", err))
	}

	var deadline time.Time
	if p.opts.HeadTimeout > 0 {
		deadline = time.Now().Add(p.opts.HeadTimeout)
		c.nc.SetReadDeadline(deadline)
	}
	fr := fasthttp.AcquireResponse()
	fr.StreamBody = true
	fr.SkipBody = req.Header.IsHead()
	err = fr.ReadLimitBody(c.br, 0)
	if err == nil && !deadline.IsZero() {
		err = c.nc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		fr.CloseBodyStream()
		fasthttp.ReleaseResponse(fr)
		switch {
		case !deadline.IsZero() && !time.Now().Before(deadline):
			err = ErrHeadTimeout
		case c.nread == 0 && c.rerr != nil && c.rerr != io.EOF:
			err = fmt.Errorf("%w: %w", errNoResponse, c.rerr)
		case c.nread == 0:
			err = errNoResponse
		default:
			err = fmt.Errorf("read response head: %w", err)
		}
		return fail(err)
	}
	r := &Response{
		Header: &fr.Header,
		p:      p,
		c:      c,
		fr:     fr,
		body:   fr.BodyStream(),
		ctx:    ctx,
		stop:   stop,
	}
	// A body that ends only when the connection does (no Content-Length, not
	// chunked) leaves nothing to reuse.
	r.keepAlive = !req.Header.ConnectionClose() && !fr.ConnectionClose() &&
		(r.body == nil || fr.Header.ContentLength() >= -1)
	if r.body == nil {
		r.err = io.EOF // HEAD, 204, 304: no body
	}
	return r, false, nil
}

// CancelHook is a Context that runs one function on cancellation itself,
// as the gateway's attempt contexts do: a request registers the close of
// its connection there at no cost, where context.AfterFunc costs a child
// context and a stop function.
type CancelHook interface {
	// OnCancel arranges for f to run in its own goroutine once the context
	// is cancelled (at once if it is); f replaces an earlier one.
	OnCancel(f func())
	// ClearCancel unregisters the function, reporting whether it did so
	// before the function was started.
	ClearCancel() bool
}

// registration is a request's function on its context's cancellation.
type registration struct {
	hook CancelHook
	stop func() bool // context.AfterFunc's
}

// onCancel registers f on ctx's cancellation.
func onCancel(ctx context.Context, f func()) registration {
	if h, ok := ctx.(CancelHook); ok {
		h.OnCancel(f)
		return registration{hook: h}
	}
	if ctx.Done() != nil {
		return registration{stop: context.AfterFunc(ctx, f)}
	}
	return registration{}
}

// clear unregisters the function, reporting whether it did so before the
// function was started (true when there was none).
func (r registration) clear() bool {
	switch {
	case r.hook != nil:
		return r.hook.ClearCancel()
	case r.stop != nil:
		return r.stop()
	}
	return true
}

// get pops a usable idle connection, or dials one when fresh is set or the
// stack is empty.
func (p *Pool) get(ctx context.Context, fresh bool) (*conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if fresh {
			p.mu.Unlock()
			break
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		idleSince := c.idleSince
		p.mu.Unlock()
		if time.Since(idleSince) < p.opts.IdleTimeout && c.idleUsable() {
			c.reused = true
			return c, nil
		}
		c.close()
	}
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(p.addr, ctx)
		}
		p.dialErrors.Add(1)
		return nil, &DialError{Addr: p.addr, Err: err}
	}
	nc = sockio.Wrap(nc)
	raw := nc
	if p.tls != nil {
		if nc, err = p.handshake(ctx, nc); err != nil {
			return nil, err
		}
	}
	p.dials.Add(1)
	return newConn(nc, raw, int(p.opts.MaxResponseHeaderBytes)), nil
}

// handshake runs TLS over a fresh connection within DialTimeout.
func (p *Pool) handshake(ctx context.Context, nc net.Conn) (net.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	tc := tls.Client(nc, p.tls)
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctxError(p.addr, ctx)
		}
		p.dialErrors.Add(1)
		return nil, &DialError{Addr: p.addr, Err: fmt.Errorf("tls handshake: %w", err)}
	}
	return tc, nil
}

// put returns c to the idle stack, or closes it when the stack is full or
// the pool closed.
func (p *Pool) put(c *conn) {
	if c.br.Buffered() > 0 {
		c.close() // bytes past the response: the conn is out of step
		return
	}
	now := time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.opts.MaxIdleConns {
		p.mu.Unlock()
		c.close()
		return
	}
	c.idleSince = now
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// reap closes idle connections older than IdleTimeout, every half of it,
// until Close.
func (p *Pool) reap() {
	t := time.NewTicker(max(p.opts.IdleTimeout/2, 10*time.Millisecond))
	defer t.Stop()
	var old []*conn
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			now := time.Now()
			old = old[:0]
			p.mu.Lock()
			n := 0
			for n < len(p.idle) && now.Sub(p.idle[n].idleSince) >= p.opts.IdleTimeout {
				n++
			}
			if n > 0 {
				old = append(old, p.idle[:n]...)
				m := copy(p.idle, p.idle[n:])
				clear(p.idle[m:])
				p.idle = p.idle[:m]
			}
			p.mu.Unlock()
			for _, c := range old {
				c.close()
			}
			clear(old)
		}
	}
}
