package upstream_test

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/upstream"
)

// A streamed chat completion relayed event by event. Cancelling ctx at any
// point, say when the gateway's client disconnects, closes the connection
// and the engine aborts the request.
func ExamplePool_Do() {
	o := sim.DefaultOptions()
	o.Port = 0
	o.Engine.Latency.Zero = true
	engine, err := sim.Start(o)
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	pool, err := upstream.NewPool(engine.URL(), upstream.Options{})
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/chat/completions")
	req.Header.SetContentType("application/json")
	req.SetBodyString(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := pool.Do(ctx, req)
	if err != nil {
		panic(err) // *upstream.DialError, *upstream.ClosedError, ...: try another replica
	}
	defer resp.Close()
	fmt.Println(resp.StatusCode(), resp.Chunked())
	sc := bufio.NewScanner(resp)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if data == "[DONE]" {
				fmt.Println(data)
			} else {
				fmt.Println(strings.Contains(data, `"object":"chat.completion.chunk"`))
			}
		}
	}
	// Output:
	// 200 true
	// true
	// true
	// true
	// true
	// [DONE]
}
