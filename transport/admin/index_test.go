package admin

import (
	"encoding/json"
	"testing"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// /admin/index lists every replica's index with its mode, and the event
// stream of those that have one (null for the others, and no batch yet);
// /admin/replicas shows the mode too.
func TestIndexRoute(t *testing.T) {
	a := replica.NewHandle("a", "http://a", []string{"m"}, replica.NewCounters(0, 0))
	a.SetEvents(replica.EventStream{Endpoint: "tcp://10.0.0.1:5557", Engine: kvevent.EngineSGLang})
	b := replica.NewHandle("b", "http://b", []string{"m"}, replica.NewCounters(0, 0))
	fleet := replicas{b.Snapshot(), a.Snapshot()}
	s := New(fleet, telemetry.New(fleet))
	code, body := get(s, "/admin/index")
	var page struct {
		Entries  *int `json:"entries"`
		Replicas []struct {
			ID     string          `json:"id"`
			Mode   string          `json:"index_mode"`
			Fill   *float64        `json:"fill"`
			Events json.RawMessage `json:"events"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(body, &page); code != 200 || err != nil || len(page.Replicas) != 2 || page.Entries == nil {
		t.Fatalf("%d %v %s", code, err, body)
	}
	ra, rb := page.Replicas[0], page.Replicas[1]
	if ra.ID != "a" || ra.Mode != "approximate" || ra.Fill == nil || rb.ID != "b" || string(rb.Events) != "null" {
		t.Fatalf("%s", body)
	}
	var ev struct {
		Endpoint  string            `json:"endpoint"`
		Engine    string            `json:"engine_type"`
		LastSeq   *uint64           `json:"last_seq"`
		Fallbacks map[string]uint64 `json:"fallbacks"`
	}
	if err := json.Unmarshal(ra.Events, &ev); err != nil || ev.Endpoint != "tcp://10.0.0.1:5557" || ev.Engine != "sglang" ||
		ev.LastSeq != nil || len(ev.Fallbacks) != len(replica.FallbackReasons) {
		t.Fatalf("events %s: %v", ra.Events, err)
	}
	code, body = get(s, "/admin/replicas")
	var reps struct {
		Replicas []struct {
			Mode string `json:"index_mode"`
		} `json:"replicas"`
	}
	if err := json.Unmarshal(body, &reps); code != 200 || err != nil || len(reps.Replicas) != 2 || reps.Replicas[0].Mode != "approximate" {
		t.Fatalf("/admin/replicas: %d %v %s", code, err, body)
	}
}
