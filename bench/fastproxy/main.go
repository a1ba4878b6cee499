// Command fastproxy is the floor for a Go reverse proxy on the gateway's
// own HTTP library (issue 16, "Baselines"): a fasthttp server that sends
// each request to the next upstream, round robin, over kept-alive
// connections, and streams the answer back as it arrives. It does nothing
// else: no routing, no parsing, no metrics. bench/gwload runs it beside
// nginx and the gateway.
//
// Usage: fastproxy [--listen 127.0.0.1:0] UPSTREAM...   (host:port, loopback)
//
// It prints "fastproxy: serving on http://ADDR" once it listens.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (loopback)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: fastproxy [--listen ADDR] UPSTREAM...")
		os.Exit(2)
	}
	for _, a := range append(flag.Args(), *listen) {
		if !loopback(a) {
			fmt.Fprintf(os.Stderr, "fastproxy: %s: only loopback addresses\n", a)
			os.Exit(2)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fastproxy:", err)
		os.Exit(1)
	}
	srv := newServer(flag.Args())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		srv.Shutdown()
	}()
	fmt.Printf("fastproxy: serving on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "fastproxy:", err)
		os.Exit(1)
	}
}

// newServer is the proxy in front of upstreams (host:port each).
func newServer(upstreams []string) *fasthttp.Server {
	clients := make([]*fasthttp.HostClient, len(upstreams))
	for i, a := range upstreams {
		// StreamResponseBody: the body goes on to the client as it is read,
		// and the connection returns to the pool once it is all read.
		// MaxConns: as many connections as requests in flight, as nginx
		// opens them (fasthttp's default of 512 refuses the rest).
		clients[i] = &fasthttp.HostClient{Addr: a, StreamResponseBody: true, MaxConns: 1 << 16,
			MaxIdleConnDuration: 15 * time.Second, ReadTimeout: 5 * time.Minute}
	}
	var next atomic.Uint64
	return &fasthttp.Server{
		Name:        "fastproxy",
		IdleTimeout: 75 * time.Second,
		Handler: func(ctx *fasthttp.RequestCtx) {
			c := clients[(next.Add(1)-1)%uint64(len(clients))]
			// Connection is hop by hop, both ways: the server has noted the
			// client's, and keeps its connection open or not by it.
			ctx.Request.Header.ResetConnectionClose()
			resp := fasthttp.AcquireResponse()
			if err := c.Do(&ctx.Request, resp); err != nil {
				fasthttp.ReleaseResponse(resp)
				ctx.Error("fastproxy: "+err.Error(), fasthttp.StatusBadGateway)
				return
			}
			resp.Header.CopyTo(&ctx.Response.Header)
			ctx.Response.Header.ResetConnectionClose()
			if resp.BodyStream() == nil { // no body to stream
				ctx.Response.SetBody(resp.Body())
				fasthttp.ReleaseResponse(resp)
				return
			}
			ctx.Response.SetBodyStream(upstreamBody{resp}, max(resp.Header.ContentLength(), -1))
		},
	}
}

// upstreamBody is an upstream's streamed response body; the server closes
// it once written, which hands the connection back.
type upstreamBody struct{ resp *fasthttp.Response }

func (b upstreamBody) Read(p []byte) (int, error) { return b.resp.BodyStream().Read(p) }

func (b upstreamBody) Close() error {
	err := b.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(b.resp)
	return err
}

func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
