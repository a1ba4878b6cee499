package ratelimit

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConcurrentAdmit: callers racing on one tenant at one instant get
// exactly the bucket's size between them, and another tenant's bucket is
// its own.
func TestConcurrentAdmit(t *testing.T) {
	c := config.Default()
	c.RateLimits.Default.RequestsPerSecond = 100
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := New(c, nil, func() time.Time { return t0 })
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, v := l.Admit("a", 0); v.OK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Errorf("admitted %d of 400 at one instant, want the size, 100", ok.Load())
	}
	if _, v := l.Admit("b", 0); !v.OK || v.Requests.Remaining != 99 {
		t.Errorf("tenant b: %+v", v)
	}
	var m bytes.Buffer
	l.Metrics().WritePrometheus(&m)
	if !strings.Contains(m.String(), `inferrail_ratelimit_throttled_total{tenant="a",reason="requests"} 300`) {
		t.Errorf("metrics:\n%s", m.String())
	}
}

// TestUnlimitedTenant: a tenant without limits gets no buckets and no
// series, until a reload gives it a limit.
func TestUnlimitedTenant(t *testing.T) {
	c := config.Default()
	rps := 1.0
	c.RateLimits.Tenants = []config.TenantRateLimit{{Tenant: "x", RequestsPerSecond: &rps}}
	l := New(c, nil, nil)
	for range 3 {
		if k, v := l.Admit("free", 1e9); !v.OK || k.Limited() || v.Requests.On {
			t.Fatalf("unlimited: %+v %+v", k, v)
		}
	}
	if _, ok := l.Tokens("free"); ok {
		t.Error("buckets for a tenant without limits")
	}
	next := *c
	next.RateLimits.Default.RequestsPerSecond = 1
	l.Apply(&next)
	if _, v := l.Admit("free", 0); !v.OK || !v.Requests.On {
		t.Errorf("after the reload: %+v", v)
	}
	if _, v := l.Admit("free", 0); v.OK {
		t.Errorf("second at 1/s: %+v", v)
	}
}
