package kvevents

import (
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/kvevent"
)

// parses returns a check that engine e's config in parses to want.
func parses(t *testing.T, e kvevent.Engine) func(in string, want Config) {
	return func(in string, want Config) {
		t.Helper()
		got, err := ParseEngineConfig(e, in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got != want {
			t.Fatalf("%s:\n got %+v\nwant %+v", in, got, want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	f := parses(t, kvevent.EngineVLLM)
	def := DefaultConfig()
	f(`{}`, def)
	on := def
	on.EnableKVCacheEvents, on.Publisher = true, "zmq"
	f(`{"enable_kv_cache_events": true}`, on)
	f(`{"enable_kv_cache_events": true, "publisher": null, "replay_endpoint": null}`, on)
	off := def
	off.Publisher = "zmq"
	f(`{"publisher": "zmq"}`, off)
	nul := on
	nul.Publisher = "null"
	f(`{"enable_kv_cache_events": true, "publisher": "null"}`, nul)
	full := Config{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://*:6000",
		ReplayEndpoint: "tcp://*:6001", BufferSteps: 5, HWM: 0, MaxQueueSize: 7, Topic: "kv@10.0.0.1@m"}
	f(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:6000","replay_endpoint":"tcp://*:6001",
	   "buffer_steps":5,"hwm":0,"max_queue_size":7,"topic":"kv@10.0.0.1@m"}`, full)
}

func TestParseConfigErrors(t *testing.T) {
	f := func(in string, wantKeys ...string) {
		t.Helper()
		_, err := ParseConfig(in)
		if err == nil {
			t.Fatalf("%s: no error", in)
		}
		for _, k := range wantKeys {
			if !strings.Contains(err.Error(), k) {
				t.Fatalf("%s: error %q does not name %q", in, err, k)
			}
		}
	}
	f(`{"enable_kv_cache_events": true, "bogus": 1}`, "bogus: unknown key")
	f(`{"endpoint": null}`, "endpoint: must not be null")
	f(`{"buffer_steps": "10"}`, "buffer_steps")
	f(`{"publisher": "kafka"}`, "publisher")
	// Every problem at once.
	f(`{"enable_kv_cache_events": true, "endpoint": "udp://x:1", "replay_endpoint": "tcp://nohost",
	    "hwm": -1, "buffer_steps": -2, "max_queue_size": 0}`,
		"endpoint", "replay_endpoint", "hwm", "buffer_steps", "max_queue_size")
	f(`[]`)
	f(`{} {}`)
	f(`null`)
	f(``)
}

func TestOffsetEndpoint(t *testing.T) {
	f := func(ep string, rank int, want string) {
		t.Helper()
		got, err := OffsetEndpoint(ep, rank)
		if err != nil || got != want {
			t.Fatalf("OffsetEndpoint(%q, %d) = %q, %v; want %q", ep, rank, got, err, want)
		}
	}
	f("tcp://*:5557", 0, "tcp://*:5557")
	f("tcp://*:5557", 2, "tcp://*:5559")
	f("tcp://[::]:5557", 1, "tcp://[::]:5558")
	f("tcp://127.0.0.1:0", 3, "tcp://127.0.0.1:0")
	f("inproc://cache", 1, "inproc://cache_dp1")
	f("", 4, "")
	if _, err := OffsetEndpoint("ipc:///tmp/x", 1); err == nil {
		t.Fatal("ipc with a rank accepted")
	}
}

func TestPublisherBinds(t *testing.T) {
	f := func(e kvevent.Engine, ep string, want bool) {
		t.Helper()
		if PublisherBinds(e, ep) != want {
			t.Fatalf("PublisherBinds(%s, %q) = %v", e, ep, !want)
		}
	}
	for _, e := range kvevent.Engines() {
		f(e, "tcp://*:5557", true)
		f(e, "tcp://[::]:5557", true)
		f(e, "ipc:///tmp/kv", true)
		f(e, "inproc://kv", true)
		f(e, "tcp://10.0.0.1:5557", false)
		f(e, "tcp://router.local:5557", false)
	}
	// vLLM connects to the bind-all address; current SGLang binds it.
	f(kvevent.EngineVLLM, "tcp://0.0.0.0:5557", false)
	f(kvevent.EngineSGLang, "tcp://0.0.0.0:5557", true)
}

// SGLang's --kv-events-config: no enable_kv_cache_events (publisher "zmq"
// alone turns events on, and its default is "null"), and a
// snapshot_endpoint vLLM does not have.
func TestParseSGLangConfig(t *testing.T) {
	f := parses(t, kvevent.EngineSGLang)
	def := DefaultConfig()
	f(`{}`, def)
	on := def
	on.EnableKVCacheEvents, on.Publisher = true, "zmq"
	f(`{"publisher": "zmq"}`, on)
	snap := on
	snap.Endpoint, snap.ReplayEndpoint, snap.SnapshotEndpoint = "tcp://0.0.0.0:5557", "tcp://*:5558", "tcp://*:5559"
	f(`{"publisher": "zmq", "endpoint": "tcp://0.0.0.0:5557", "replay_endpoint": "tcp://*:5558", "snapshot_endpoint": "tcp://*:5559"}`, snap)
	for _, bad := range []string{`{"enable_kv_cache_events": true}`, `{"publisher": "zmq", "snapshot_endpoint": "udp://x"}`} {
		if _, err := ParseEngineConfig(kvevent.EngineSGLang, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := ParseConfig(`{"enable_kv_cache_events": true, "snapshot_endpoint": "tcp://*:5559"}`); err == nil ||
		!strings.Contains(err.Error(), "snapshot_endpoint: unknown key") {
		t.Errorf("vLLM's config took snapshot_endpoint: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(`{"enable_kv_cache_events": true}`)
	f.Add(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"t"}`)
	f.Add(`{"hwm": null}`)
	f.Add(`{"publisher":"zmq","endpoint":"tcp://0.0.0.0:5557","snapshot_endpoint":"tcp://*:5559"}`)
	f.Fuzz(func(t *testing.T, in string) {
		for _, e := range kvevent.Engines() {
			cfg, err := ParseEngineConfig(e, in)
			if err != nil {
				continue
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%s: parsed config does not validate: %v", e, err)
			}
			if e == kvevent.EngineSGLang && cfg.EnableKVCacheEvents != (cfg.Publisher == "zmq") {
				t.Fatalf("SGLang config %+v: events on without publisher zmq, or the other way", cfg)
			}
		}
	})
}

func TestMeet(t *testing.T) {
	f := func(e kvevent.Engine, pub, sub string, bind bool, want string) {
		t.Helper()
		err := Meet(e, pub, sub, bind)
		switch {
		case want == "" && err != nil:
			t.Fatalf("Meet(%s, %q, %q, %v) = %v, want nil", e, pub, sub, bind, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Fatalf("Meet(%s, %q, %q, %v) = %v, want %q", e, pub, sub, bind, err, want)
		}
	}
	vllm, sgl := kvevent.EngineVLLM, kvevent.EngineSGLang
	// Issue 17's first try: the engine and the gateway both given
	// tcp://127.0.0.1:PORT, so both connect.
	f(vllm, "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5557", false, "both sides connect")
	f(vllm, "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5557", true, "")
	f(vllm, "tcp://*:5557", "tcp://10.0.0.7:5557", false, "")
	f(vllm, "tcp://*:5557", "tcp://0.0.0.0:5557", true, "both sides bind")
	f(vllm, "tcp://[::]:5557", "tcp://10.0.0.7:5557", false, "")
	f(vllm, "tcp://*:5557", "tcp://10.0.0.7:6000", false, "listens on port 5557")
	f(vllm, "tcp://10.0.0.1:6000", "tcp://0.0.0.0:5557", true, "connects to port 6000")
	f(vllm, "tcp://*:0", "tcp://10.0.0.7:6000", false, "")
	f(vllm, "ipc:///tmp/kv", "ipc:///tmp/kv", false, "")
	f(vllm, "ipc:///tmp/kv", "ipc:///tmp/other", false, "the gateway ipc:///tmp/other")
	f(vllm, "ipc:///tmp/kv", "tcp://10.0.0.7:5557", false, "uses ipc")
	// SGLang binds 0.0.0.0, vLLM connects to it.
	f(sgl, "tcp://0.0.0.0:5557", "tcp://10.0.0.7:5557", false, "")
	f(vllm, "tcp://0.0.0.0:5557", "tcp://10.0.0.7:5557", false, "both sides connect")
	f(sgl, "tcp://0.0.0.0:5557", "tcp://10.0.0.7:5557", true, "SGLang's publisher binds")
	// Without the engine's config only ipc with bind is settled.
	f(vllm, "", "ipc:///tmp/kv", true, "both sides bind")
	f(vllm, "", "ipc:///tmp/kv", false, "")
	f(vllm, "", "tcp://127.0.0.1:5557", false, "")
	// The replay socket always binds on the engine.
	if err := MeetReplay("tcp://*:5558", "tcp://10.0.0.7:5558"); err != nil {
		t.Errorf("MeetReplay: %v", err)
	}
	if err := MeetReplay("tcp://*:5558", "tcp://10.0.0.7:5559"); err == nil || !strings.Contains(err.Error(), "port 5558") {
		t.Errorf("MeetReplay on another port: %v", err)
	}
	if err := MeetReplay("", "tcp://10.0.0.7:5558"); err == nil || !strings.Contains(err.Error(), "no replay_endpoint") {
		t.Errorf("MeetReplay without one: %v", err)
	}
}
