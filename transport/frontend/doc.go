// Package frontend is the gateway's client-facing HTTP server: the OpenAI API
// on fasthttp, proxied to engine replicas chosen by the fleet's routing
// actors.
//
// It reads each body once, parses only its model field, asks the fleet for a
// replica under a deadline, and relays the engine's response frame by frame,
// retrying before the first response byte and aborting the engine's request
// when the client leaves. It makes no routing decisions itself and holds no
// per-token state.
//
// A Server owns its fasthttp server, one watcher goroutine (client
// disconnects and replica health while requests wait) and the upstream
// connection pools; Shutdown stops and joins them. Its methods are safe for
// concurrent use.
package frontend
