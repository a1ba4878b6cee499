package stress

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// controlPatches are the config patches the control scenario cycles
// through: policies, a split, shadows, a cost_model setting, a replica
// joining and leaving. {replicas3} and {replicas4} stand for the static
// replica lists without and with the fourth simulator.
var controlPatches = []string{
	`{"routing":{"default_policy":"cost_model"}}`,
	`{"routing":{"split":{"cost_model":50,"round_robin":50}}}`,
	`{"routing":{"shadow":["kv_aware","p2c"]}}`,
	`{"routing":{"epsilon":0.5}}`,
	`{"replicas":{replicas4}}`,
	`{"routing":{"split":null,"shadow":null,"epsilon":null,"default_policy":"least_request"}}`,
	`{"replicas":{replicas3}}`,
}

// runControl changes the running config every 20 ms under 2,000 req/s
// while the admin API is read without pause: every request must succeed,
// every patch must apply, and the generation must count them.
func runControl(t *T) error {
	n := pick(t, 20000, 8000)
	const rate, period = 2000, 20 * time.Millisecond
	sims, err := t.startSims(4, func(o *sim.Options) { o.Engine.Latency.Zero = true })
	if err != nil {
		return err
	}
	urls := simURLs(sims)
	gw, err := t.startGateway(urls[:3], func(c *config.Config) {
		c.Routing.DefaultPolicy = "least_request"
		c.Models[0].Tokenizer = "builtin:sim"
	})
	if err != nil {
		return err
	}
	list := func(k int) string {
		var rs []string
		for i, u := range urls[:k] {
			b, _ := json.Marshal(map[string]any{"id": replicaID(i), "url": u, "models": []string{modelName}})
			rs = append(rs, string(b))
		}
		return "[" + strings.Join(rs, ",") + "]"
	}
	patches := make([]string, len(controlPatches))
	for i, p := range controlPatches {
		patches[i] = strings.NewReplacer("{replicas3}", list(3), "{replicas4}", list(4)).Replace(p)
	}

	admin := t.client(gw.AdminAddr, 8)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, readErrs int
	wg.Go(func() { // the admin API read without pause
		paths := []string{"/admin/replicas", "/admin/config", "/metrics", "/admin/shadow"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			reads++
			if _, err := getPage(admin, paths[i%len(paths)]); err != nil {
				readErrs++
			}
		}
	})
	var patchLat []time.Duration
	var applied, unchanged int
	var patchErrs []string
	i := 0

	every(&wg, stop, period, func() { // a patch every 20 ms
		a := send(admin, "PATCH", "/admin/config", "application/merge-patch+json", []byte(patches[i%len(patches)]), 5*time.Second)
		patchLat = append(patchLat, a.done.Sub(a.sent))
		var r struct {
			Result string `json:"result"`
			Error  string `json:"error"`
		}
		switch {
		case a.err != nil:
			patchErrs = append(patchErrs, a.err.Error())
		case a.status != 200 || json.Unmarshal(a.body, &r) != nil:
			patchErrs = append(patchErrs, fmt.Sprintf("status %d: %s", a.status, trim(a.body, 200)))
		case r.Result == "applied":
			applied++
		default:
			unchanged++
		}
		i++
	})
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{t.client(gw.Addr, 256)}, rate, n, func(i int) loadgen.Spec { return specN("control", i, 1, false) })
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	failed, kinds := l.checkAll(nil)
	var cur struct {
		Generation uint64 `json:"generation"`
	}
	page, err := getPage(admin, "/admin/config")
	if err == nil {
		err = json.Unmarshal(page, &cur)
	}
	if err != nil {
		return fmt.Errorf("/admin/config: %w", err)
	}
	lat := loadgen.Summarize(patchLat)
	t.Figf("%d requests at %.0f/s (sent at %.0f/s) during %d config patches every %v (%d applied, %d unchanged; policies, a split, shadows, epsilon, a replica joining and leaving), each answered in %s p50, %s p99, %s max; %d admin reads; %d request errors, %d patch errors, %d read errors; generation %d",
		n, float64(rate), float64(n-1)/l.LastSent.Sub(l.Start).Seconds(), len(patchLat), period, applied, unchanged,
		ms(lat.P50S), ms(lat.P99S), ms(lat.MaxS), reads, failed, len(patchErrs), readErrs, cur.Generation)
	t.Checkf(failed == 0, "%d requests failed: %v", failed, kinds)
	t.Checkf(len(patchErrs) == 0, "%d patches failed, the first: %v", len(patchErrs), first(patchErrs))
	t.Checkf(readErrs == 0, "%d admin reads failed", readErrs)
	t.Checkf(applied > 0 && cur.Generation == uint64(1+applied), "generation %d after %d applied patches, want %d", cur.Generation, applied, 1+applied)
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
