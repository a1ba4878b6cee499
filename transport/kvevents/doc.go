// Package kvevents carries vLLM's KV cache events over ZeroMQ
// (vllm/distributed/kv_events.py, ZmqEventPublisher): a Publisher shaped like
// vLLM's, with sequence numbers and a replay socket, and a Subscriber that
// reads an engine's stream, detects gaps and repairs them by replay.
//
// It owns the sockets (github.com/go-zeromq/zmq4, no libzmq) and their
// goroutines, and nothing else: batches are kvevent values in and out, and
// what they mean (the mirror of an engine's cache, routing) is decided by
// the caller. Each socket is owned by exactly one goroutine; every goroutine
// is stopped and joined by its owner's Close.
package kvevents
