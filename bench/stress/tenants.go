package stress

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
)

// The tenants scenario's load (issue 15): ten tenants with one
// requests-per-second limit each; nine send well within it, one sends ten
// times its limit.
const (
	tenantCount    = 10
	tenantLimit    = 50.0 // rate_limits.default.requests_per_second
	tenantRate     = 20.0 // each well-behaved tenant's rate
	abuserRate     = 10 * tenantLimit
	tenantTTFTRise = 1.2 // the others' p99 TTFT with the abuser, at most this times without
	// tenantBurst is rate_limits.default.requests_burst: a tenth of a
	// second's worth. At the default, one second's worth, the abuser's 50
	// requests land on the three simulators at once as it starts, and on a
	// quiet machine raised the others' p99 TTFT from 10 to 92 ms (12-01).
	tenantBurst = 5.0
)

// tenantKey is tenant i's API key; tenant 0 is the abuser.
func tenantKey(i int) string { return "sk-stress-tenant-" + strconv.Itoa(i) + "-0123456789abcdef" }

// tenantAnswer is one request's outcome, with what a client reads to back
// off.
type tenantAnswer struct {
	status       int
	sent         time.Time
	latency      time.Duration // sent to the whole answer: a one-token completion's TTFT
	retryAfter   string
	retryAfterMs string
	code         string // error.code of a 429
	err          error
}

// postAs sends body as tenant i's key.
func postAs(hc *fasthttp.HostClient, i int, path string, body []byte) tenantAnswer {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + hc.Addr + path)
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer "+tenantKey(i))
	req.SetBodyRaw(body)
	a := tenantAnswer{sent: time.Now()}
	if a.err = hc.DoTimeout(req, resp, 30*time.Second); a.err != nil {
		return a
	}
	a.latency = time.Since(a.sent)
	a.status = resp.StatusCode()
	a.retryAfter = string(resp.Header.Peek("Retry-After"))
	a.retryAfterMs = string(resp.Header.Peek("Retry-After-Ms"))
	if a.status == fasthttp.StatusTooManyRequests {
		if f, err := findCode(resp.Body()); err == nil {
			a.code = f
		}
	}
	return a
}

// tenantLoad sends n requests at rate from tenant(i), one-token
// completions, and returns the answers in order.
func tenantLoad(ctx context.Context, hc *fasthttp.HostClient, rate float64, n int, tag string, tenant func(i int) int) ([]tenantAnswer, error) {
	out := make([]tenantAnswer, n)
	bodies := make([][]byte, n)
	for i := range n {
		bodies[i] = bodyFor(specN(tag, i, 1, false))
	}
	_, err := loadgen.RunOpenLoop(ctx, loadgen.Schedule{Rate: rate, N: n}, func(ctx context.Context, i int) error {
		out[i] = postAs(hc, tenant(i), "/v1/completions", bodies[i])
		return out[i].err
	})
	return out, err
}

// runTenants: one tenant sending ten times its limit must not slow the
// others down, and must be held to its limit with 429s that say when to
// come back. The phases without and with the abuser take turns, pairs of
// them; a pair during which the rest of the machine held more than
// judgeCores does not judge the TTFT bound (its figure says so), as the
// latency scenario's pairs do.
func runTenants(t *T) error {
	const phase = 3 * time.Second
	const pairs = 3 // short too: one pair's p99 is a coin toss
	sims, err := t.startSims(3, nil)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		for i := range tenantCount {
			c.Auth.APIKeys.Keys = append(c.Auth.APIKeys.Keys, config.APIKey{ID: "key-" + strconv.Itoa(i),
				Tenant: "tenant-" + strconv.Itoa(i), SHA256: config.HashKey(tenantKey(i))})
		}
		c.RateLimits.Default.RequestsPerSecond = tenantLimit
		c.RateLimits.Default.RequestsBurst = tenantBurst
	})
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, 512)
	others := func(i int) int { return 1 + i%(tenantCount-1) }
	n := int(tenantRate * (tenantCount - 1) * phase.Seconds())
	var ratios []float64
	for pair := range pairs {
		self0, machine0, t0 := loadgen.SelfCPU(), machineCPU(), time.Now()
		// Without the abuser, tenant 0 sends at its limit: the engines then
		// serve the same load in both phases (the abuser is accepted at its
		// limit too), and what the comparison sees is the refused excess
		// alone. Before, the baseline lacked those 50 req/s, and the others'
		// p99 rose with the fleet's extra load whatever the gateway did: one
		// pair in two over 1.2× on this 2-core machine, at 9435594 as after.
		var withinErr error
		var wgWithin sync.WaitGroup
		wgWithin.Go(func() {
			_, withinErr = tenantLoad(t.ctx, hc, tenantLimit, int(tenantLimit*phase.Seconds()), "tenants-within-"+strconv.Itoa(pair), func(int) int { return 0 })
		})
		alone, err := tenantLoad(t.ctx, hc, tenantRate*(tenantCount-1), n, "tenants-alone-"+strconv.Itoa(pair), others)
		wgWithin.Wait()
		if err != nil {
			return err
		}
		if withinErr != nil {
			return withinErr
		}
		var abuser []tenantAnswer
		var abuserErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			abuser, abuserErr = tenantLoad(t.ctx, hc, abuserRate, int(abuserRate*phase.Seconds()), "tenants-abuser-"+strconv.Itoa(pair), func(int) int { return 0 })
		})
		with, err := tenantLoad(t.ctx, hc, tenantRate*(tenantCount-1), n, "tenants-with-"+strconv.Itoa(pair), others)
		wg.Wait()
		if err != nil {
			return err
		}
		if abuserErr != nil {
			return abuserErr
		}
		busy := ((machineCPU() - machine0) - (loadgen.SelfCPU() - self0)).Seconds() / time.Since(t0).Seconds()

		pAlone, badAlone := okP99(alone)
		pWith, badWith := okP99(with)
		ratio := float64(pWith) / float64(max(pAlone, 1))
		judged := "judged"
		if busy > judgeCores {
			judged = fmt.Sprintf("not judged: the rest of the machine held %.2f cores", busy)
		} else {
			ratios = append(ratios, ratio)
		}
		t.Figf("pair %d: 9 tenants at %.0f/s each (limit %.0f/s), %d requests a phase: p99 TTFT %s beside a tenant at its limit, %s beside the abuser (%.2f×, %s); %d and %d not served",
			pair+1, tenantRate, tenantLimit, n, ms(pAlone.Seconds()), ms(pWith.Seconds()), ratio, judged, badAlone, badWith)
		t.Checkf(badAlone == 0 && badWith == 0, "pair %d: the well-behaved tenants got %d and %d answers other than 200", pair+1, badAlone, badWith)
		judgeAbuser(t, pair, abuser)
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		median := ratios[len(ratios)/2]
		t.Checkf(median <= tenantTTFTRise, "the others' p99 TTFT beside the abuser is %.2f× their p99 without it (median of %d judged pairs), over %.1f×",
			median, len(ratios), tenantTTFTRise)
	}
	return nil
}

// okP99 is the p99 latency of the answers that were served, and how many
// were not.
func okP99(as []tenantAnswer) (time.Duration, int) {
	var lat []time.Duration
	bad := 0
	for _, a := range as {
		if a.err != nil || a.status != 200 {
			bad++
			continue
		}
		lat = append(lat, a.latency)
	}
	return loadgen.Percentile(lat, 99), bad
}

// judgeAbuser checks the abuser's answers: accepted at its limit once its
// burst is spent (its first second), every refusal a 429
// rate_limit_exceeded with Retry-After 1 and retry-after-ms at most one
// interval of the limit.
func judgeAbuser(t *T, pair int, abuser []tenantAnswer) {
	var accepted, refused, wrong int
	var first, last time.Time
	for _, a := range abuser {
		if first.IsZero() || a.sent.Before(first) {
			first = a.sent
		}
		if a.sent.After(last) {
			last = a.sent
		}
	}
	steady := first.Add(time.Second)
	interval := time.Duration(float64(time.Second) / tenantLimit)
	for _, a := range abuser {
		switch {
		case a.err != nil:
			wrong++
		case a.status == 200:
			if !a.sent.Before(steady) {
				accepted++
			}
		case a.status == fasthttp.StatusTooManyRequests:
			refused++
			wait, err := strconv.Atoi(a.retryAfterMs)
			if a.code != "rate_limit_exceeded" || a.retryAfter != "1" || err != nil || wait < 1 ||
				time.Duration(wait)*time.Millisecond > interval+time.Millisecond {
				wrong++
			}
		default:
			wrong++
		}
	}
	rate := float64(accepted) / last.Sub(steady).Seconds()
	t.Figf("pair %d: the abuser sent %d at %.0f/s: %d refused with 429, accepted %.1f/s after its first second (limit %.0f/s); %d answers wrong",
		pair+1, len(abuser), abuserRate, refused, rate, tenantLimit, wrong)
	t.Checkf(wrong == 0, "pair %d: %d of the abuser's answers were not a 200 or a 429 rate_limit_exceeded with Retry-After 1 and retry-after-ms ≤ %v",
		pair+1, wrong, interval)
	t.Checkf(math.Abs(rate-tenantLimit) <= 0.05*tenantLimit, "pair %d: the abuser's accepted rate %.1f/s is not within 5%% of its limit %.0f/s",
		pair+1, rate, tenantLimit)
	t.Checkf(refused > 0, "pair %d: the abuser was never refused", pair+1)
}

// findCode reads a 429's error.code.
func findCode(body []byte) (string, error) {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	err := json.Unmarshal(body, &e)
	return e.Error.Code, err
}
