package discovery

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/model/kvevent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Call is one call a RecordingSink received: a set of endpoints, or a
// failure (Failing, "" for recovered).
type Call struct {
	Source    string
	Endpoints []fleet.Endpoint
	Failure   bool
	Failing   string
}

// RecordingSink records every call on a buffered channel.
type RecordingSink struct{ Calls chan Call }

func NewRecordingSink() *RecordingSink { return &RecordingSink{Calls: make(chan Call, 256)} }

func (s *RecordingSink) SetEndpoints(source string, eps []fleet.Endpoint) {
	s.Calls <- Call{Source: source, Endpoints: eps}
}

func (s *RecordingSink) SourceFailing(source string, err error) {
	c := Call{Source: source, Failure: true}
	if err != nil {
		c.Failing = err.Error()
	}
	s.Calls <- c
}

// next returns the next call within 5s.
func (s *RecordingSink) next(t testing.TB) Call {
	t.Helper()
	select {
	case c := <-s.Calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no call within 5s")
		return Call{}
	}
}

// none checks that no call arrives within d.
func (s *RecordingSink) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case c := <-s.Calls:
		t.Fatalf("unexpected call %+v", c)
	case <-time.After(d):
	}
}

// metric returns the series of set named name, as the page writes it.
func metric(set *metrics.Set, name string) string {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return "absent"
}

func TestReporter(t *testing.T) {
	sink, set := NewRecordingSink(), metrics.NewSet()
	var logs bytes.Buffer
	r := NewReporter("kubernetes", sink, slog.New(slog.NewTextHandler(&logs, nil)), set)
	eps := []fleet.Endpoint{{ID: "a", URL: "http://10.0.0.1:8000"}}
	r.Set(eps)
	if c := sink.next(t); c.Source != "kubernetes" || len(c.Endpoints) != 1 {
		t.Fatalf("first set: %+v", c)
	}
	r.Set([]fleet.Endpoint{{ID: "a", URL: "http://10.0.0.1:8000"}}) // equal: not passed on
	r.Fail("RBAC forbids listing pods", errors.New("pods is forbidden"))
	r.Fail("RBAC forbids listing pods", errors.New("pods is forbidden")) // a repeat says nothing
	if c := sink.next(t); !c.Failure || c.Failing != "RBAC forbids listing pods: pods is forbidden" {
		t.Fatalf("failure: %+v", c)
	}
	sink.none(t, 20*time.Millisecond)
	if n := strings.Count(logs.String(), "RBAC forbids"); n != 1 {
		t.Errorf("%d log lines for one failure:\n%s", n, logs.String())
	}
	if got := metric(set, `inferrail_discovery_failing{source="kubernetes"}`); got != "1" {
		t.Errorf("failing = %s", got)
	}
	r.Fail("the API server cannot be reached", errors.New("connection refused")) // another cause: said
	if c := sink.next(t); !strings.HasPrefix(c.Failing, "the API server") {
		t.Fatalf("second failure: %+v", c)
	}
	r.OK()
	r.OK()
	if c := sink.next(t); !c.Failure || c.Failing != "" {
		t.Fatalf("recovery: %+v", c)
	}
	sink.none(t, 20*time.Millisecond)
	for name, want := range map[string]string{
		`inferrail_discovery_failing{source="kubernetes"}`:        "0",
		`inferrail_discovery_failures_total{source="kubernetes"}`: "2",
		`inferrail_discovery_updates_total{source="kubernetes"}`:  "1",
		`inferrail_discovery_endpoints{source="kubernetes"}`:      "1",
	} {
		if got := metric(set, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

func TestTemplate(t *testing.T) {
	tmpl := Template{Scheme: "https", Models: []string{"m"}, MaxConcurrency: 7, KVEventsPort: 5557, KVEventsReplayPort: 5558,
		Engine: kvevent.EngineSGLang}
	ep := tmpl.Endpoint("p-rank-1", netip.MustParseAddr("10.0.0.9"), 8001, 1, map[string]string{"llm-d.ai/role": "decode"})
	got := fmt.Sprintf("%s %s %v %d %s %s %s %v", ep.ID, ep.URL, ep.Models, ep.MaxConcurrency, ep.Events.Endpoint, ep.Events.Replay,
		ep.Events.Engine, ep.Labels)
	if want := "p-rank-1 https://10.0.0.9:8001 [m] 7 tcp://10.0.0.9:5558 tcp://10.0.0.9:5559 sglang map[llm-d.ai/role:decode]"; got != want {
		t.Fatalf("endpoint:\n got %s\nwant %s", got, want)
	}
	if ep := (&Template{Scheme: "http"}).Endpoint("x", netip.MustParseAddr("10.0.0.9"), 80, 0, nil); ep.Events.Endpoint != "" {
		t.Fatalf("no kv_events_port, stream %q", ep.Events.Endpoint)
	}
}
