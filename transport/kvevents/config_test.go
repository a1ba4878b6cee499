package kvevents

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	f := func(in string, want Config) {
		t.Helper()
		got, err := ParseConfig(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got != want {
			t.Fatalf("%s:\n got %+v\nwant %+v", in, got, want)
		}
	}
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

func TestBinds(t *testing.T) {
	f := func(ep string, want bool) {
		t.Helper()
		if binds(ep) != want {
			t.Fatalf("binds(%q) = %v", ep, !want)
		}
	}
	f("tcp://*:5557", true)
	f("tcp://[::]:5557", true)
	f("ipc:///tmp/kv", true)
	f("inproc://kv", true)
	f("tcp://10.0.0.1:5557", false)
	f("tcp://router.local:5557", false)
}

func FuzzParseConfig(f *testing.F) {
	f.Add(`{"enable_kv_cache_events": true}`)
	f.Add(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","topic":"t"}`)
	f.Add(`{"hwm": null}`)
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseConfig(in)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
	})
}
