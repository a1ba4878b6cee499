package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/shadow"
)

// least_request routes 300 requests with every policy in shadow, over two
// config generations (the reload changes cost_model's epsilon, so the
// model's shadows are rebuilt as generation 2): the shadow log replays to
// every pick, and a line whose pick was changed is reported with its
// number and fails the replay.
func TestReplayShadowEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "least_request"
	cfg.Routing.Shadow = []string{"round_robin", "random", "least_request", "p2c", "prefix_hash", "kv_aware", "cost_model"}
	cfg.Routing.Epsilon = 1
	cfg.Server.ReloadInterval = 0
	cfg.Observability.ShadowLog = filepath.Join(t.TempDir(), "shadow.jsonl")
	g := serveConfigFile(t, cfg)
	addr, admin := g.addr, g.admin

	// 150 requests per generation from 3 clients: 10 documents asked
	// about in turn, so that the cache-aware shadows have prefixes to
	// follow and the stateful ones see requests interleaved.
	send := func(from int) {
		t.Helper()
		var wg sync.WaitGroup
		for c := range 3 {
			wg.Go(func() {
				for i := range 50 {
					n := from + 50*c + i
					body := fmt.Sprintf(`{"model":"sim","max_tokens":2,"prompt":"%s question %d"}`,
						strings.Repeat(fmt.Sprintf("document %d says ", n%10), 40), n)
					resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("request %d: status %d", n, resp.StatusCode)
					}
				}
			})
		}
		wg.Wait()
	}
	// replayed waits until the model's current shadows have replayed n
	// decisions each.
	replayed := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, b := getBody(t, "http://"+admin+"/admin/shadow")
			var page shadowPage
			json.Unmarshal(b, &page)
			all := len(page.Models) == 1 && len(page.Models[0].Shadows) == 7
			for _, s := range page.Models[0].Shadows {
				all = all && s.Decisions == n
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the shadows did not replay %d decisions within 10s: %s", n, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	send(0)
	replayed(150)
	cfg.Routing.Epsilon = 0.5
	g.write(t, cfg)
	resp, err := http.Post("http://"+admin+"/admin/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"applied"`)) {
		t.Fatalf("reload: %d %s", resp.StatusCode, b)
	}
	send(150)
	replayed(150) // the rebuilt shadows' own
	if err := g.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}

	// The whole log replays.
	var out, errOut bytes.Buffer
	if code := run([]string{"replay-shadow", cfg.Observability.ShadowLog}, &out, &errOut); code != 0 {
		t.Fatalf("replay-shadow exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("replay-shadow: %s", out.String())
	if !strings.Contains(out.String(), "2 config, 300 decisions replayed, 2100 picks checked, 0 mismatched") {
		t.Fatalf("replay-shadow: %s", out.String())
	}

	// Change one pick, in the second generation.
	log, err := os.ReadFile(cfg.Observability.ShadowLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
	tampered := -1
	for i, line := range lines {
		l, err := shadow.ParseLine(line)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if l.Kind != shadow.KindDecision || l.Gen != 2 || l.Seq != 100 {
			continue
		}
		p := &l.Picks[6] // cost_model's
		p.Picked = (p.Picked + 1) % len(l.Decision.Cands)
		if lines[i], err = json.Marshal(l); err != nil {
			t.Fatal(err)
		}
		tampered = i + 1
		break
	}
	if tampered < 0 {
		t.Fatal("no decision 100 of generation 2 in the log")
	}
	bad := filepath.Join(t.TempDir(), "tampered.jsonl")
	if err := os.WriteFile(bad, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"replay-shadow", bad}, &out, &errOut); code != 1 {
		t.Fatalf("replay-shadow of a tampered log: exit %d:\n%s", code, out.String())
	}
	t.Logf("replay-shadow of the tampered log: %s", out.String())
	if want := fmt.Sprintf("line %d: mismatch: model %s seq 100: replayed cost_model picked", tampered, cfg.Models[0].Name); !strings.Contains(out.String(), want) ||
		!strings.Contains(out.String(), "2100 picks checked, 1 mismatched") {
		t.Fatalf("replay-shadow of a tampered log does not report %q:\n%s", want, out.String())
	}
}
