// Package extproc is the endpoint picker (EPP) behind Envoy: a gRPC server
// of envoy.service.ext_proc.v3.ExternalProcessor that speaks the Gateway
// API Inference Extension's protocol, so that Envoy (or a gateway built on
// it) forwards each request to the replica the fleet's routing chose.
//
// Envoy opens one Process stream per HTTP request, in FULL_DUPLEX_STREAMED
// mode for both bodies. The server buffers the request body to its end
// (within server.max_body_bytes), prepares and routes it as the gateway's
// front end does (transport/frontend: ResolveModel, PolicyRequest, the
// flow-control Gate, Decide, RouteError, CheckPrompt), then answers the
// request headers with the ordered fallback list of endpoints and sends the
// body back in chunks. On the response it relays every chunk at once and
// does the accounting the front end does: the lease, the first byte, the
// outcome and the prompt check, on the replica Envoy says really served.
//
// A Server owns no goroutine of its own; each stream runs in the goroutine
// grpc-go gives it, and Readiness runs in the caller's. It makes no
// routing decision itself. Its methods are safe for concurrent use.
package extproc
