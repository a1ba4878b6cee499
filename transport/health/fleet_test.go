package health

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
)

// TestFleetWithHTTPProber runs a fleet's health checks through this Prober
// against two loopback engines: cards reach Models, and an engine that
// stops answering leaves rotation and comes back.
func TestFleetWithHTTPProber(t *testing.T) {
	var down [2]chan struct{}
	var srvs [2]*httptest.Server
	for i := range srvs {
		down[i] = make(chan struct{}, 1)
		var failing atomic.Bool
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-down[i]:
				failing.Store(!failing.Load())
			default:
			}
			switch {
			case r.URL.Path == "/health" && failing.Load():
				w.WriteHeader(http.StatusServiceUnavailable)
			case r.URL.Path == "/health":
				w.WriteHeader(http.StatusOK)
			case r.URL.Path == "/v1/models":
				fmt.Fprintf(w, `{"object":"list","data":[{"id":"m","object":"model","owned_by":"engine-%d"}]}`, i)
			default:
				w.WriteHeader(http.StatusNotFound)
			}
		}))
		t.Cleanup(srvs[i].Close)
	}
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "m", BlockSize: 16}}
	for i, s := range srvs {
		cfg.Replicas = append(cfg.Replicas, config.Replica{ID: fmt.Sprint("e", i), URL: s.URL, Models: []string{"m"}, MaxConcurrency: 64})
	}
	cfg.Health.Interval = 5 * time.Millisecond
	cfg.Health.Timeout = 5 * time.Millisecond
	cfg.Health.UnhealthyThreshold = 2
	f, err := fleet.Start(cfg, fleet.Options{Prober: NewProber()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	waitFor(t, "both engines' cards", func() bool {
		for _, s := range f.Replicas() {
			if s.Cards["m"] == nil {
				return false
			}
		}
		return true
	})
	if c := string(f.Models()[0].Card); !strings.Contains(c, `"owned_by":"engine-0"`) {
		t.Fatalf("card %s, want engine-0's (the first replica's)", c)
	}

	down[1] <- struct{}{} // e1 starts failing its health checks
	waitFor(t, "e1 unhealthy", func() bool { s, _ := f.Snapshot("e1"); return !s.Healthy })
	for range 50 {
		d, err := f.Pick(fleet.PickRequest{Model: "m", Deadline: time.Now().Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Replica != "e0" {
			t.Fatalf("routed to the unhealthy %s", d.Replica)
		}
		f.Done(d, fleet.OutcomeOK)
	}
	down[1] <- struct{}{} // and recovers
	waitFor(t, "e1 healthy again", func() bool { s, _ := f.Snapshot("e1"); return s.Healthy })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
