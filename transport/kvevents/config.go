package kvevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/inferrail/inferrail/model/kvevent"
)

// Config mirrors vLLM's --kv-events-config (vllm/config/kv_events.py,
// KVEventsConfig) and SGLang's (KVEventsConfig in
// python/sglang/srt/disaggregation/kv_events.py, the same keys but
// enable_kv_cache_events, plus snapshot_endpoint). The JSON keys are the
// engines'; the comments are their docs. A Config is a plain value.
type Config struct {
	// EnableKVCacheEvents turns publishing on. Default false. SGLang has no
	// such key: its events are on when publisher is "zmq".
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null". Empty (JSON null or absent) resolves as
	// vLLM does: "zmq" when events are enabled, else "null". SGLang's
	// default is "null".
	Publisher string `json:"publisher"`
	// Endpoint is the PUB socket's address. Default "tcp://*:5557". The socket
	// binds when the address contains "*" or "::" or is ipc:// or inproc://,
	// and connects otherwise ("bind stable, connect volatile"); SGLang also
	// binds an address with 0.0.0.0 (PublisherBinds).
	Endpoint string `json:"endpoint"`
	// ReplayEndpoint is the ROUTER socket's address (always bound) answering
	// replay requests; empty (JSON null, the default) disables replay.
	// vLLM's examples use "tcp://*:5558".
	ReplayEndpoint string `json:"replay_endpoint"`
	// SnapshotEndpoint is SGLang's ROUTER for placement snapshots
	// (snapshot_endpoint); empty for none. With one, SGLang appends its
	// publisher's epoch to the live topic. Publisher does not serve it.
	SnapshotEndpoint string `json:"snapshot_endpoint"`
	// BufferSteps is how many of the last batches are kept for replay.
	// Default 10000.
	BufferSteps int `json:"buffer_steps"`
	// HWM is the PUB socket's high-water mark: messages queued past it are
	// dropped. 0 means no limit. Default 100000.
	HWM int `json:"hwm"`
	// MaxQueueSize bounds the queue between Publish and the socket; a batch
	// published onto a full queue is dropped and counted. Default 100000.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is the first frame of every message; subscribers filter on its
	// prefix. Default "". llm-d's convention is "kv@<pod-ip>@<model>".
	Topic string `json:"topic"`
}

// DefaultConfig returns vLLM's defaults: disabled, publisher "null".
func DefaultConfig() Config {
	return Config{
		Publisher:    "null",
		Endpoint:     "tcp://*:5557",
		BufferSteps:  10_000,
		HWM:          100_000,
		MaxQueueSize: 100_000,
	}
}

// nullable lists the keys the engines declare as Optional (JSON null
// allowed).
var nullable = map[string]bool{"publisher": true, "replay_endpoint": true, "snapshot_endpoint": true}

// ParseConfig parses vLLM's --kv-events-config JSON object over
// DefaultConfig: ParseEngineConfig with EngineVLLM.
func ParseConfig(jsonText string) (Config, error) {
	return ParseEngineConfig(kvevent.EngineVLLM, jsonText)
}

// ParseEngineConfig parses engine e's --kv-events-config JSON object over
// DefaultConfig. Like the engines' configs it rejects unknown keys (SGLang's
// has no enable_kv_cache_events, vLLM's no snapshot_endpoint), null for keys
// that are not optional and values of the wrong type; every problem is
// reported at once, each naming its key. With SGLang, EnableKVCacheEvents
// is set when publisher is "zmq", since that alone turns its events on. The
// result is validated (see Config.Validate).
func ParseEngineConfig(e kvevent.Engine, jsonText string) (Config, error) {
	cfg := DefaultConfig()
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(jsonText))
	if err := dec.Decode(&fields); err != nil {
		return Config{}, fmt.Errorf("kv-events-config: %w", err)
	}
	if fields == nil {
		return Config{}, errors.New("kv-events-config: want a JSON object")
	}
	if dec.More() {
		return Config{}, errors.New("kv-events-config: data after the JSON object")
	}
	publisherSet := false
	dst := map[string]any{
		"publisher":       &cfg.Publisher,
		"endpoint":        &cfg.Endpoint,
		"replay_endpoint": &cfg.ReplayEndpoint,
		"buffer_steps":    &cfg.BufferSteps,
		"hwm":             &cfg.HWM,
		"max_queue_size":  &cfg.MaxQueueSize,
		"topic":           &cfg.Topic,
	}
	if e == kvevent.EngineSGLang {
		dst["snapshot_endpoint"] = &cfg.SnapshotEndpoint
	} else {
		dst["enable_kv_cache_events"] = &cfg.EnableKVCacheEvents
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		v := fields[k]
		p, ok := dst[k]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("kv-events-config: %s: unknown key", k))
		case bytes.Equal(bytes.TrimSpace(v), []byte("null")):
			if !nullable[k] {
				errs = append(errs, fmt.Errorf("kv-events-config: %s: must not be null", k))
			}
		default:
			if err := json.Unmarshal(v, p); err != nil {
				errs = append(errs, fmt.Errorf("kv-events-config: %s: %w", k, err))
			} else if k == "publisher" {
				publisherSet = true
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	switch {
	case e == kvevent.EngineSGLang:
		// SGLang's publisher defaults to "null" and is the only switch.
		if !publisherSet {
			cfg.Publisher = "null"
		}
		cfg.EnableKVCacheEvents = cfg.Publisher == "zmq"
	case !publisherSet:
		// vLLM's __post_init__: publisher None → "zmq" if enabled else "null".
		cfg.Publisher = "null"
		if cfg.EnableKVCacheEvents {
			cfg.Publisher = "zmq"
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv-events-config: %s: "+format, append([]any{key}, args...)...))
	}
	switch c.Publisher {
	case "zmq", "null", "":
	default:
		bad("publisher", "%q is not one of \"zmq\", \"null\"", c.Publisher)
	}
	if c.active() {
		if err := checkEndpoint(c.Endpoint); err != nil {
			bad("endpoint", "%v", err)
		}
		if c.ReplayEndpoint != "" {
			if err := checkEndpoint(c.ReplayEndpoint); err != nil {
				bad("replay_endpoint", "%v", err)
			}
		}
		if c.SnapshotEndpoint != "" {
			if err := checkEndpoint(c.SnapshotEndpoint); err != nil {
				bad("snapshot_endpoint", "%v", err)
			}
		}
	}
	if c.BufferSteps < 0 {
		bad("buffer_steps", "%d is negative", c.BufferSteps)
	}
	if c.HWM < 0 {
		bad("hwm", "%d is negative", c.HWM)
	}
	// vLLM's queue.Queue treats <= 0 as unbounded; a Publisher's queue is
	// always bounded, so it must be given a size.
	if c.MaxQueueSize <= 0 {
		bad("max_queue_size", "%d is not positive", c.MaxQueueSize)
	}
	return errors.Join(errs...)
}

// active reports whether c asks for a ZMQ publisher.
func (c Config) active() bool {
	return c.EnableKVCacheEvents && (c.Publisher == "zmq" || c.Publisher == "")
}

// PublisherBinds reports whether engine e's publisher binds endpoint rather
// than connecting to it (ZmqEventPublisher._socket_setup in both engines):
// it binds when the address contains "*" or "::" or is ipc:// or
// inproc://, and SGLang also when it contains 0.0.0.0 (the bind-all
// address its /server_info advertises; SGLang releases before that rule
// connected to it). A publisher that connects needs a subscriber that
// binds, and the other way round.
func PublisherBinds(e kvevent.Engine, endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://") ||
		e == kvevent.EngineSGLang && strings.Contains(endpoint, "0.0.0.0")
}

// checkEndpoint checks an address the way zmq4 will parse it.
func checkEndpoint(ep string) error {
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok {
		return fmt.Errorf("%q: want <transport>://<address>", ep)
	}
	switch scheme {
	case "tcp":
		if _, _, err := splitHostPort(addr); err != nil {
			return fmt.Errorf("%q: %w", ep, err)
		}
	case "ipc", "inproc":
		if addr == "" {
			return fmt.Errorf("%q: empty address", ep)
		}
	default:
		return fmt.Errorf("%q: transport %q is not tcp, ipc or inproc", ep, scheme)
	}
	return nil
}

// splitHostPort splits a tcp address; port "*" means any (0), as in libzmq.
func splitHostPort(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if p == "*" {
		return host, 0, nil
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// OffsetEndpoint returns endpoint as data-parallel rank rank's publisher uses
// it (ZmqEventPublisher.offset_endpoint_port): tcp ports move up by rank,
// inproc names get "_dp<rank>". Rank 0 and port 0 (ephemeral, newer vLLM)
// are left alone.
func OffsetEndpoint(endpoint string, rank int) (string, error) {
	if endpoint == "" || rank == 0 {
		return endpoint, nil
	}
	switch {
	case strings.HasPrefix(endpoint, "inproc://"):
		return endpoint + "_dp" + strconv.Itoa(rank), nil
	case strings.HasPrefix(endpoint, "tcp://"):
		i := strings.LastIndexByte(endpoint, ':')
		port, err := strconv.Atoi(endpoint[i+1:])
		if err != nil {
			return "", fmt.Errorf("endpoint %q: port: %w", endpoint, err)
		}
		if port == 0 {
			return endpoint, nil
		}
		return endpoint[:i+1] + strconv.Itoa(port+rank), nil
	}
	return "", fmt.Errorf("endpoint %q: data parallel ranks need tcp:// or inproc://", endpoint)
}
