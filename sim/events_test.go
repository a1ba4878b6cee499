package sim

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/transport/kvevents"
)

// TestKVEventsMirror rebuilds the engine's cache from its KV event stream
// alone, under concurrent traffic that evicts and a prefix cache reset, and
// checks that it equals the engine's own cache, that every stored block's
// hash follows from the tokens it carries, and that replay returns the
// batches the stream delivered: with vLLM's two encodings, and with
// SGLang's (--kv-events-format sglang: SGLang's config, schema and replay).
func TestKVEventsMirror(t *testing.T) {
	for _, enc := range []string{"map", "array"} {
		t.Run(enc, func(t *testing.T) {
			testMirror(t, kvevent.EngineVLLM, enc,
				`{"enable_kv_cache_events": true, "endpoint": "tcp://*:0", "replay_endpoint": "tcp://*:0", "buffer_steps": 100000}`)
		})
	}
	t.Run("sglang", func(t *testing.T) {
		testMirror(t, kvevent.EngineSGLang, "map",
			`{"publisher": "zmq", "endpoint": "tcp://*:0", "replay_endpoint": "tcp://*:0", "buffer_steps": 100000}`)
	})
}

func testMirror(t *testing.T, format kvevent.Engine, enc, config string) {
	s := start(t, func(o *Options) {
		fast(o)
		o.Engine.NumBlocks = 96 // small enough that the traffic below evicts
		o.Engine.MaxModelLen = 1024
		o.KVEventsFormat, o.KVEventsEncoding, o.KVEventsConfig = string(format), enc, config
	})
	pubEP, replayEP := s.EventEndpoints()
	pubEP = strings.Replace(pubEP, "*", "127.0.0.1", 1)
	replayEP = strings.Replace(replayEP, "*", "127.0.0.1", 1)

	var mu sync.Mutex
	mirror := kvevent.NewMirror("GPU")
	var delivered []*kvevent.Batch
	var mirrorErr error
	sub, err := kvevents.NewSubscriber(kvevents.SubscriberConfig{
		Endpoint: pubEP, ReplayEndpoint: replayEP, CatchUp: true, Engine: format,
		OnBatch: func(d kvevents.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			if err := mirror.Apply(d.Batch); err != nil && mirrorErr == nil {
				mirrorErr = fmt.Errorf("batch %d: %w", d.Seq, err)
			}
			delivered = append(delivered, d.Batch)
		},
		OnGap: func(g kvevents.Gap) { t.Errorf("gap in the event stream: %+v", g) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	system := []string{
		strings.Repeat("You are a careful assistant. ", 12),
		strings.Repeat("Answer in French, briefly. ", 14),
		strings.Repeat("Summarise the document below. ", 10),
	}
	traffic := func(round int) {
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 15; i++ {
					body := fmt.Sprintf(`{"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d-%d-%d"}],"max_tokens":%d}`,
						system[(w+i)%len(system)], round, w, i, 8+i%24)
					if code, _, resp := post(t, s, "/v1/chat/completions", body); code != 200 {
						t.Errorf("status %d: %s", code, resp)
					}
				}
			}()
		}
		wg.Wait()
	}
	traffic(0)
	post(t, s, "/reset_prefix_cache", "")
	traffic(1)

	var want map[uint64]int
	var st engine.Stats
	s.Inspect(func(e *engine.Engine) { want, st = e.CachedHashes(), e.Stats() })
	if st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("engine not idle after traffic: %+v", st)
	}
	waitFor(t, "mirror equals the engine's cache", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Equal(mirror.Counts(), want)
	})
	mu.Lock()
	defer mu.Unlock()
	if mirrorErr != nil {
		t.Fatalf("inconsistent stream: %v", mirrorErr)
	}
	if len(want) < 20 {
		t.Fatalf("only %d cached blocks: the test exercises too little", len(want))
	}

	// Every held block's hash follows from the token ids of its chain.
	var h prefix.Hasher
	root := prefix.Root(s.Options().Model, "", "")
	rebuilt := 0
	for hash := range want {
		toks, ok := mirror.Prefix(nil, hash)
		if !ok {
			continue // its parent was evicted first
		}
		chain := h.Chain(nil, root, toks, 16)
		if got := chain[len(chain)-1].External(); got != hash {
			t.Fatalf("block %x: tokens hash to %x", hash, got)
		}
		rebuilt++
	}
	if rebuilt < len(want)/2 {
		t.Fatalf("only %d of %d blocks have a full chain", rebuilt, len(want))
	}

	// Replay from 0 returns exactly what the stream delivered.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n := 0
	err = kvevents.Replay(ctx, replayEP, 0, func(seq uint64, payload []byte) error {
		b, err := kvevent.Decode(payload, format)
		if err != nil {
			return err
		}
		if seq != uint64(n) || n >= len(delivered) || len(b.Events) != len(delivered[n].Events) {
			return fmt.Errorf("replayed batch %d differs from the streamed one", seq)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(delivered) {
		t.Fatalf("replay returned %d batches, the stream %d", n, len(delivered))
	}
	t.Logf("%s %s: %d batches, %d cached blocks mirrored, %d rebuilt from tokens", format, enc, n, len(want), rebuilt)
	if format == kvevent.EngineSGLang {
		// The stream was SGLang's: one page per BlockStored.
		for _, b := range delivered {
			for _, ev := range b.Events {
				if st, ok := ev.(*kvevent.BlockStored); ok && len(st.BlockHashes) != 1 {
					t.Fatalf("an SGLang BlockStored of %d pages", len(st.BlockHashes))
				}
			}
		}
	}
}
