package telemetry

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/load"
)

type fakeFleet struct {
	mu    sync.Mutex
	snaps []*replica.Snapshot
}

func (f *fakeFleet) Replicas() []*replica.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*replica.Snapshot(nil), f.snaps...)
}

func (f *fakeFleet) set(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snaps = f.snaps[:0]
	for _, id := range ids {
		f.snaps = append(f.snaps, &replica.Snapshot{ID: id, Healthy: true, Counters: replica.NewCounters(0, 0),
			Scrapes: &replica.ScrapeCounts{}, Shadow: &replica.Shadow{}, Load: load.Report{Running: 1}, LoadAt: time.Now(),
			IndexMode: replica.IndexApproximate})
	}
}

func page(r *Registry) string {
	var b bytes.Buffer
	r.WritePrometheus(&b)
	return b.String()
}

// series lists the page's series without values: name and labels, with
// histogram buckets folded into one line.
func series(p string) []string {
	le := regexp.MustCompile(`,?le="[^"]*"`)
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(p, "\n") {
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_") {
			continue
		}
		key := le.ReplaceAllString(line[:strings.LastIndexByte(line, ' ')], "")
		key = strings.Replace(key, "{}", "", 1)
		if !seen[key] {
			seen[key] = true
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// TestSnapshot pins every metric name and label set the gateway exports
// today. A change here is a change to every dashboard: update on purpose.
func TestSnapshot(t *testing.T) {
	f := &fakeFleet{}
	f.set("r0")
	r := New(f)
	m := r.Model("m")
	m.Retries.Inc()
	m.Disconnects.Inc()
	m.Error("no_replica")
	r.Decision("least_request", 10*time.Microsecond)
	s := r.Replica("r0", "m", "least_request")
	s.Decisions.Inc()
	s.Request(Status2xx)
	s.TTFT.Update(0.1)
	s.Duration.Update(0.2)
	want := []string{
		`inferrail_client_disconnects_total{model="m"}`,
		`inferrail_ejections_total{replica="r0"}`,
		`inferrail_load_scrapes_total{replica="r0",result="error"}`,
		`inferrail_load_scrapes_total{replica="r0",result="ok"}`,
		`inferrail_load_scrapes_total{replica="r0",result="unreadable"}`,
		`inferrail_index_bytes{replica="r0"}`,
		`inferrail_index_entries{replica="r0"}`,
		`inferrail_index_resets_total{replica="r0"}`,
		`inferrail_index_speculative_blocks{replica="r0"}`,
		`inferrail_picks_withdrawn_total{model="m"}`,
		`inferrail_prompt_tokens_checked_total{model="m",replica="r0"}`,
		`inferrail_prompt_tokens_mismatch_total{model="m",replica="r0"}`,
		`inferrail_prompt_tokens_total{model="m"}`,
		`inferrail_predicted_cached_tokens_total{model="m"}`,
		`inferrail_delivered_cached_tokens_total{model="m"}`,
		`inferrail_prediction_error_tokens_bucket{model="m",replica="r0"}`,
		`inferrail_prediction_error_tokens_count{model="m",replica="r0"}`,
		`inferrail_prediction_error_tokens_sum{model="m",replica="r0"}`,
		`inferrail_prediction_total{model="m",replica="r0",result="exact"}`,
		`inferrail_prediction_total{model="m",replica="r0",result="over"}`,
		`inferrail_prediction_total{model="m",replica="r0",result="under"}`,
		`inferrail_prediction_total{model="m",replica="r0",result="unknown"}`,
		`inferrail_replica_index_capacity_blocks{replica="r0"}`,
		`inferrail_replica_index_mode{replica="r0",mode="approximate"}`,
		`inferrail_replica_index_mode{replica="r0",mode="exact"}`,
		`inferrail_replica_index_mode{replica="r0",mode="no_tokenizer"}`,
		`inferrail_replica_queued_prefill_seconds{replica="r0"}`,
		`inferrail_replica_ejected{replica="r0"}`,
		`inferrail_replica_engine_kv_usage{replica="r0"}`,
		`inferrail_replica_engine_prefix_cache_hits{replica="r0"}`,
		`inferrail_replica_engine_prefix_cache_queries{replica="r0"}`,
		`inferrail_replica_engine_restarts_total{replica="r0"}`,
		`inferrail_replica_engine_running{replica="r0"}`,
		`inferrail_replica_engine_waiting{replica="r0"}`,
		`inferrail_replica_healthy{replica="r0"}`,
		`inferrail_replica_in_flight{replica="r0"}`,
		`inferrail_replica_pending{replica="r0"}`,
		`inferrail_replica_report_age_seconds{replica="r0"}`,
		`inferrail_replica_restarts_total{replica="r0"}`,
		`inferrail_replica_warning{replica="r0",warning="capacity_units"}`,
		`inferrail_replica_warning{replica="r0",warning="cost_model_fit_poor"}`,
		`inferrail_replica_warning{replica="r0",warning="cost_model_no_spread"}`,
		`inferrail_replica_warning{replica="r0",warning="engine_unauthorized"}`,
		`inferrail_replica_warning{replica="r0",warning="flow_metrics_stale"}`,
		`inferrail_replica_warning{replica="r0",warning="index_warm_start_failed"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_block_size"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_foreign_tokens"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_interrupted"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_no_tokenizer"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_silent"}`,
		`inferrail_replica_warning{replica="r0",warning="kv_events_unmapped"}`,
		`inferrail_replica_warning{replica="r0",warning="metrics_partial"}`,
		`inferrail_replica_warning{replica="r0",warning="metrics_unreadable"}`,
		`inferrail_replica_warning{replica="r0",warning="response_lookup_failed"}`,
		`inferrail_replica_warning{replica="r0",warning="shared_engines"}`,
		`inferrail_replica_warning{replica="r0",warning="tokenizer_mismatch"}`,
		`inferrail_replica_warning{replica="r0",warning="usage_no_cached_tokens"}`,
		`inferrail_request_duration_seconds_bucket{model="m",policy="least_request",replica="r0"}`,
		`inferrail_request_duration_seconds_count{model="m",policy="least_request",replica="r0"}`,
		`inferrail_request_duration_seconds_sum{model="m",policy="least_request",replica="r0"}`,
		`inferrail_request_errors_total{model="m",reason="no_replica"}`,
		`inferrail_requests_total{model="m",replica="r0",status="2xx"}`,
		`inferrail_requests_total{model="m",replica="r0",status="4xx"}`,
		`inferrail_requests_total{model="m",replica="r0",status="5xx"}`,
		`inferrail_requests_total{model="m",replica="r0",status="aborted"}`,
		`inferrail_requests_total{model="m",replica="r0",status="cancelled"}`,
		`inferrail_routing_decision_seconds_bucket{policy="least_request"}`,
		`inferrail_routing_decision_seconds_count{policy="least_request"}`,
		`inferrail_routing_decision_seconds_sum{policy="least_request"}`,
		`inferrail_routing_decisions_total{model="m",policy="least_request",replica="r0"}`,
		`inferrail_slo_requests_total{model="m",result="failed"}`,
		`inferrail_slo_requests_total{model="m",result="met"}`,
		`inferrail_slo_requests_total{model="m",result="not_admitted"}`,
		`inferrail_slo_requests_total{model="m",result="refused"}`,
		`inferrail_slo_requests_total{model="m",result="tpot_missed"}`,
		`inferrail_slo_requests_total{model="m",result="ttft_missed"}`,
		`inferrail_ttft_estimate_ratio_bucket{model="m"}`,
		`inferrail_ttft_estimate_ratio_count{model="m"}`,
		`inferrail_ttft_estimate_ratio_sum{model="m"}`,
		`inferrail_ttft_seconds_bucket{model="m",policy="least_request",replica="r0"}`,
		`inferrail_ttft_seconds_count{model="m",policy="least_request",replica="r0"}`,
		`inferrail_ttft_seconds_sum{model="m",policy="least_request",replica="r0"}`,
		`inferrail_upstream_retries_total{model="m"}`,
	}
	sort.Strings(want)
	got := series(page(r))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("series changed:\n%s", strings.Join(got, "\n"))
	}
}

// TestDepartedReplicasLeave: a replica that leaves the fleet leaves the
// page, even if a request records into it after it left.
func TestDepartedReplicasLeave(t *testing.T) {
	f := &fakeFleet{}
	f.set("a", "b")
	r := New(f)
	r.Replica("a", "m", "p").Request(Status2xx)
	r.Replica("b", "m", "p").Request(Status2xx)
	f.set("a")
	r.Replica("b", "m", "p").Request(Status2xx) // a request racing the removal
	if p := page(r); strings.Contains(p, `replica="b"`) {
		t.Fatalf("departed replica on the page:\n%s", p)
	}
	if p := page(r); !strings.Contains(p, `replica="a"`) {
		t.Fatal("live replica missing")
	}
}

// TestChurnBounded: 8,000 replicas churned through the fleet, three at a
// time, leave no series behind.
func TestChurnBounded(t *testing.T) {
	f := &fakeFleet{}
	r := New(f)
	var max int
	for i := 0; i < 8000; i += 3 {
		ids := []string{fmt.Sprint("dns-", i), fmt.Sprint("dns-", i+1), fmt.Sprint("dns-", i+2)}
		f.set(ids...)
		for _, id := range ids {
			r.Replica(id, "m", "p").Request(Status2xx)
		}
		if i%300 == 0 {
			max = maxInt(max, len(page(r)))
		}
	}
	p := page(r)
	max = maxInt(max, len(p))
	live := map[string]bool{}
	for _, s := range f.Replicas() {
		live[s.ID] = true
	}
	for _, m := range regexp.MustCompile(`replica="([^"]*)"`).FindAllStringSubmatch(p, -1) {
		if !live[m[1]] {
			t.Fatalf("departed replica %s on the page", m[1])
		}
	}
	t.Logf("largest page %d bytes", max)
	if max > 40<<10+16<<10 { // live series plus process metrics, never the departed
		t.Fatalf("page grew to %d bytes", max)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Sink keeps benchmark results alive.
var Sink *Series

// BenchmarkRecordStreamedRequest is what one streamed request costs in
// metrics: its decision, its series lookup, TTFT, duration and outcome.
func BenchmarkRecordStreamedRequest(b *testing.B) {
	f := &fakeFleet{}
	f.set("r0", "r1", "r2")
	r := New(f)
	ids := []string{"r0", "r1", "r2"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s := r.Replica(ids[i%3], "inferrail/sim-8b", "least_request")
			r.Decision("least_request", 5*time.Microsecond)
			s.Decisions.Inc()
			s.TTFT.Update(0.05)
			s.Duration.Update(0.5)
			s.Request(Status2xx)
			Sink = s
			i++
		}
	})
}

// BenchmarkRenderAfterChurn renders the page after 8,000 replicas came and
// went, with three live.
func BenchmarkRenderAfterChurn(b *testing.B) {
	f := &fakeFleet{}
	r := New(f)
	for i := 0; i < 8000; i++ {
		f.set(fmt.Sprint("dns-", i))
		r.Replica(fmt.Sprint("dns-", i), "m", "p").Request(Status2xx)
	}
	f.set("dns-7997", "dns-7998", "dns-7999")
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		r.WritePrometheus(&buf)
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}

// TestKVEventsSeries: replicas subscribed to their engine's KV events get
// the inferrail_kv_events_* series; the others do not. Every replica has its
// index mode.
func TestKVEventsSeries(t *testing.T) {
	f := &fakeFleet{}
	f.set("a", "b")
	c := &replica.EventCounts{}
	c.Batches.Add(3)
	c.Stored.Add(7)
	c.Removed.Add(2)
	c.Gaps.Add(1)
	a := *f.snaps[0]
	a.Events, a.EventCounts = replica.EventStream{Endpoint: "tcp://10.0.0.1:5557"}, c
	a.IndexMode = replica.IndexExact
	f.snaps[0] = &a
	p := page(New(f))
	for _, want := range []string{
		`inferrail_kv_events_batches_total{replica="a"} 3`,
		`inferrail_kv_events_blocks_total{replica="a",op="stored"} 7`,
		`inferrail_kv_events_blocks_total{replica="a",op="removed"} 2`,
		`inferrail_kv_events_blocks_total{replica="a",op="unmapped"} 0`,
		`inferrail_kv_events_blocks_total{replica="a",op="unknown"} 0`,
		`inferrail_kv_events_gaps_total{replica="a"} 1`,
		`inferrail_kv_events_fallbacks_total{replica="a",reason="silence"} 0`,
		`inferrail_kv_events_fallbacks_total{replica="a",reason="gap"} 0`,
		`inferrail_kv_events_resyncs_total{replica="a"} 0`,
		`inferrail_replica_index_mode{replica="a",mode="exact"} 1`,
		`inferrail_replica_index_mode{replica="a",mode="approximate"} 0`,
		`inferrail_replica_index_mode{replica="b",mode="approximate"} 1`,
	} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(p, `kv_events_batches_total{replica="b"}`) {
		t.Error("a replica without kv_events has KV event series")
	}
}

// Each policy of a model's split has its percent on the page.
func TestModelPolicyPercent(t *testing.T) {
	r := New(&fakeFleet{})
	r.ModelPolicy("m", "cost_model", 75)
	r.ModelPolicy("m", "round_robin", 25)
	r.ModelPolicy("other", "p2c", 100)
	p := page(r)
	for _, want := range []string{
		`inferrail_model_policy_percent{model="m",policy="cost_model"} 75`,
		`inferrail_model_policy_percent{model="m",policy="round_robin"} 25`,
		`inferrail_model_policy_percent{model="other",policy="p2c"} 100`,
		`inferrail_model_policy{model="m",policy="cost_model"} 1`,
		`inferrail_model_policy{model="m",policy="round_robin"} 1`,
		`inferrail_model_policy{model="other",policy="p2c"} 1`,
	} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("page lacks %s:\n%s", want, p)
		}
	}
}

// BenchmarkLookups is what every proxied request asks the registry for:
// its model's series, its (replica, model, policy) series and the
// decision histogram, from both cores at once.
func BenchmarkLookups(b *testing.B) {
	r := New(&fakeFleet{})
	ids := []string{"r0", "r1", "r2"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Model("m")
			r.Replica(ids[i%len(ids)], "m", "least_request").Decisions.Inc()
			r.Decision("least_request", time.Microsecond)
			i++
		}
	})
}

// An SLO result is counted under its model and result, and read back in
// flow.SLOResults' order; an unknown result is a bug.
func TestSLOCounts(t *testing.T) {
	r := New(&fakeFleet{})
	m := r.Model("m")
	m.SLO(flow.SLOMet)
	m.SLO(flow.SLOMet)
	m.SLO(flow.SLONotAdmitted)
	r.Model("n").SLO(flow.SLOFailed)
	got := m.SLOCounts()
	for i, res := range flow.SLOResults {
		want := map[string]uint64{flow.SLOMet: 2, flow.SLONotAdmitted: 1}[res]
		if got[i] != want {
			t.Errorf("%s = %d, want %d", res, got[i], want)
		}
	}
	p := page(r)
	if !strings.Contains(p, MetricSLO+`{model="m",result="met"} 2`+"\n") || !strings.Contains(p, MetricSLO+`{model="n",result="failed"} 1`+"\n") {
		t.Errorf("page:\n%s", p)
	}
	defer func() {
		if v := recover(); v == nil || !strings.HasPrefix(fmt.Sprint(v), "BUG: ") {
			t.Errorf("an unknown result: %v", v)
		}
	}()
	m.SLO("late")
}
