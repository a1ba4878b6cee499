// Package envoytest plays Envoy's side of an ext_proc stream in
// FULL_DUPLEX_STREAMED mode, for tests of the endpoint picker and for a
// test proxy that calls the picker and then forwards to the endpoint it
// named. It checks the picker's answers as Envoy does: the request headers'
// answer before any body answer, and every body answer a StreamedResponse.
//
// An Exchange is one HTTP request's stream, used by one goroutine.
package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/inferrail/inferrail/transport/extproc/protocol"
)

// Request is one HTTP request as Envoy hands it to ext_proc.
type Request struct {
	Method, Path string
	Headers      map[string]string
	// Body is sent in chunks of ChunkSize bytes (0: one chunk). A nil
	// Body sends the headers with end_of_stream, as a GET has.
	Body      []byte
	ChunkSize int
	// Subset is the subset hint: nil for none, a []string for a list, a
	// string for one comma string.
	Subset any
}

// Routed is the picker's answer to a request.
type Routed struct {
	// Endpoints is the destination header's fallback list, best first;
	// Metadata the same value under envoy.lb, which must be equal.
	Endpoints []string
	Metadata  string
	// Headers are the header mutation's headers, keys lower-case.
	Headers map[string]string
	// ClearRouteCache is the headers answer's flag.
	ClearRouteCache bool
	// Body is the body the picker sent back, and Chunks its chunk sizes.
	Body   []byte
	Chunks []int
	// Immediate is set when the picker answered at once (an error).
	Immediate *extprocv3.ImmediateResponse
}

// Exchange is one Process stream.
type Exchange struct {
	stream extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

// Start opens a Process stream on conn. Cancelling ctx, or Close, ends it
// as a client that leaves makes Envoy end it.
func Start(ctx context.Context, conn grpc.ClientConnInterface) (*Exchange, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Exchange{stream: st, cancel: cancel}, nil
}

// Close ends the stream.
func (e *Exchange) Close() { e.cancel() }

// CloseSend half-closes the stream, as Envoy does once the response ended.
func (e *Exchange) CloseSend() error { return e.stream.CloseSend() }

func headerMap(kv map[string]string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for k, v := range kv {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	return hm
}

func metadata(ns, key string, v *structpb.Value) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{ns: {Fields: map[string]*structpb.Value{key: v}}}}
}

// ErrProtocol is a picker's answer Envoy would reject.
var ErrProtocol = errors.New("envoytest: the picker broke the ext_proc protocol")

// Request sends r's headers and body and reads the picker's answers: the
// headers' answer, then the body's, chunk by chunk, until end of stream;
// or an ImmediateResponse. An answer out of that order, or a body answer
// that is not a StreamedResponse, is an ErrProtocol.
func (e *Exchange) Request(r Request) (*Routed, error) {
	h := map[string]string{":method": r.Method, ":path": r.Path}
	for k, v := range r.Headers {
		h[strings.ToLower(k)] = v
	}
	var md *corev3.Metadata
	switch s := r.Subset.(type) {
	case string:
		md = metadata(protocol.SubsetNamespace, protocol.SubsetKey, structpb.NewStringValue(s))
	case []string:
		vals := make([]*structpb.Value, len(s))
		for i, x := range s {
			vals[i] = structpb.NewStringValue(x)
		}
		md = metadata(protocol.SubsetNamespace, protocol.SubsetKey, structpb.NewListValue(&structpb.ListValue{Values: vals}))
	}
	noBody := r.Body == nil
	if !noBody {
		h["content-length"] = strconv.Itoa(len(r.Body))
	}
	if err := e.stream.Send(&extprocv3.ProcessingRequest{MetadataContext: md, Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(h), EndOfStream: noBody}}}); err != nil {
		return nil, err
	}
	if !noBody {
		size := r.ChunkSize
		if size <= 0 {
			size = max(len(r.Body), 1)
		}
		for off := 0; ; off += size {
			end := min(off+size, len(r.Body))
			if err := e.stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
				RequestBody: &extprocv3.HttpBody{Body: r.Body[off:end], EndOfStream: end == len(r.Body)}}}); err != nil {
				return nil, err
			}
			if end == len(r.Body) {
				break
			}
		}
	}
	out := &Routed{Headers: map[string]string{}}
	for headed := false; ; {
		resp, err := e.stream.Recv()
		if err != nil {
			return nil, err
		}
		switch v := resp.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			out.Immediate = v.ImmediateResponse
			return out, nil
		case *extprocv3.ProcessingResponse_RequestHeaders:
			if headed {
				return nil, fmt.Errorf("%w: a second request headers answer", ErrProtocol)
			}
			headed = true
			if err := out.readHeaders(v.RequestHeaders, resp.DynamicMetadata); err != nil {
				return nil, err
			}
			if noBody {
				return out, nil
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			if !headed {
				return nil, fmt.Errorf("%w: a body answer before the headers answer (Envoy: spurious response message)", ErrProtocol)
			}
			sr := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr == nil {
				return nil, fmt.Errorf("%w: a body answer without a StreamedResponse mutation", ErrProtocol)
			}
			out.Body = append(out.Body, sr.Body...)
			out.Chunks = append(out.Chunks, len(sr.Body))
			if sr.EndOfStream {
				return out, nil
			}
		default:
			return nil, fmt.Errorf("%w: %T during the request", ErrProtocol, resp.Response)
		}
	}
}

func (out *Routed) readHeaders(h *extprocv3.HeadersResponse, dm *structpb.Struct) error {
	cr := h.GetResponse()
	out.ClearRouteCache = cr.GetClearRouteCache()
	for _, o := range cr.GetHeaderMutation().GetSetHeaders() {
		v := string(o.GetHeader().GetRawValue())
		if v == "" {
			v = o.GetHeader().GetValue()
		}
		out.Headers[strings.ToLower(o.GetHeader().GetKey())] = v
	}
	if d := out.Headers[protocol.DestinationHeader]; d != "" {
		out.Endpoints = strings.Split(d, ",")
	}
	out.Metadata = dm.GetFields()[protocol.LBNamespace].GetStructValue().GetFields()[protocol.DestinationHeader].GetStringValue()
	if out.Metadata != out.Headers[protocol.DestinationHeader] {
		return fmt.Errorf("%w: the destination header %q and envoy.lb metadata %q differ", ErrProtocol, out.Headers[protocol.DestinationHeader], out.Metadata)
	}
	return nil
}

// ResponseHeaders sends the engine's response head, with servedBy (when
// not empty) as the served endpoint, and returns the headers the picker
// set.
func (e *Exchange) ResponseHeaders(status int, contentType, servedBy string, end bool) (map[string]string, error) {
	var md *corev3.Metadata
	if servedBy != "" {
		md = metadata(protocol.LBNamespace, protocol.ServedKey, structpb.NewStringValue(servedBy))
	}
	h := map[string]string{":status": strconv.Itoa(status), "content-type": contentType}
	if err := e.stream.Send(&extprocv3.ProcessingRequest{MetadataContext: md, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(h), EndOfStream: end}}}); err != nil {
		return nil, err
	}
	resp, err := e.stream.Recv()
	if err != nil {
		return nil, err
	}
	rh, ok := resp.Response.(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		return nil, fmt.Errorf("%w: %T for the response headers", ErrProtocol, resp.Response)
	}
	set := map[string]string{}
	for _, o := range rh.ResponseHeaders.GetResponse().GetHeaderMutation().GetSetHeaders() {
		set[strings.ToLower(o.GetHeader().GetKey())] = string(o.GetHeader().GetRawValue())
	}
	return set, nil
}

// ResponseChunk sends one chunk of the engine's body and returns what the
// picker sends on in its place.
func (e *Exchange) ResponseChunk(b []byte, end bool) ([]byte, error) {
	if err := e.stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: end}}}); err != nil {
		return nil, err
	}
	resp, err := e.stream.Recv()
	if err != nil {
		return nil, err
	}
	rb, ok := resp.Response.(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok {
		return nil, fmt.Errorf("%w: %T for a response chunk", ErrProtocol, resp.Response)
	}
	sr := rb.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
	if sr == nil {
		return nil, fmt.Errorf("%w: a response body answer without a StreamedResponse mutation", ErrProtocol)
	}
	return sr.Body, nil
}

// Forward does what Envoy does once the picker has routed r: it sends the
// picked body to Endpoints[fallback] over hc (a retry onto a later endpoint
// of the list is fallback > 0), reports that endpoint as the one that
// served, and relays the engine's response through the picker chunk by
// chunk, calling chunk with what the picker sends on. It returns the
// engine's status and the picker's response headers.
func (e *Exchange) Forward(ctx context.Context, hc *http.Client, r Request, routed *Routed, fallback int, chunk func([]byte)) (int, map[string]string, error) {
	return e.Relay(ctx, hc, r, routed, fallback, nil, chunk)
}

// Relay is Forward with head called once the picker has answered the
// response headers, before the first chunk: with the engine's status and
// content type and the headers the picker set. A proxy writes its
// response head there.
func (e *Exchange) Relay(ctx context.Context, hc *http.Client, r Request, routed *Routed, fallback int,
	head func(status int, contentType string, set map[string]string), chunk func([]byte)) (int, map[string]string, error) {
	if fallback >= len(routed.Endpoints) {
		return 0, nil, fmt.Errorf("envoytest: no endpoint %d in %v", fallback, routed.Endpoints)
	}
	ep := routed.Endpoints[fallback]
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+ep+r.Path, bytes.NewReader(routed.Body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range routed.Headers {
		if k != "content-length" {
			req.Header.Set(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	set, err := e.ResponseHeaders(resp.StatusCode, resp.Header.Get("Content-Type"), ep, false)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if head != nil {
		head(resp.StatusCode, resp.Header.Get("Content-Type"), set)
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		end := rerr != nil
		if n > 0 || end {
			out, err := e.ResponseChunk(buf[:n], end)
			if err != nil {
				return resp.StatusCode, set, err
			}
			if chunk != nil {
				chunk(out)
			}
		}
		if end {
			if errors.Is(rerr, io.EOF) {
				return resp.StatusCode, set, nil
			}
			return resp.StatusCode, set, rerr
		}
	}
}
