// Package kvevents carries vLLM's and SGLang's KV cache events over ZeroMQ
// (ZmqEventPublisher in vllm/distributed/kv_events.py and in SGLang's
// python/sglang/srt/disaggregation/kv_events.py): a Publisher shaped like
// either engine's, with sequence numbers and a replay socket, a Subscriber
// that reads an engine's stream in its schema, detects gaps and restarts
// and repairs gaps by replay, each engine's --kv-events-config, and the
// rule by which a publisher binds or connects (PublisherBinds, Meet).
//
// It owns the sockets (github.com/go-zeromq/zmq4, no libzmq) and their
// goroutines, and nothing else: batches are kvevent values in and out, and
// what they mean (the mirror of an engine's cache, routing) is decided by
// the caller. Each socket is owned by exactly one goroutine; every goroutine
// is stopped and joined by its owner's Close.
package kvevents
