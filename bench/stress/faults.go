package stress

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// zeroLatency makes simulators answer as fast as they can.
func zeroLatency(o *sim.Options) { o.Engine.Latency.Zero = true }

// fastProbes probes every replica every 100 ms, so that three failed
// probes take a replica out of rotation in 300 to 400 ms. The timeout is
// the whole interval: on a machine this busy a healthy engine's answer can
// take tens of milliseconds to be read.
func fastProbes(c *config.Config) {
	c.Health.Interval = 100 * time.Millisecond
	c.Health.Timeout = 100 * time.Millisecond
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitFor polls gw every 2 ms until cond holds for replica id and returns
// when it first did; zero when timeout passed first.
func waitFor(ctx context.Context, gw *gateway, id string, timeout time.Duration, cond func(replicaView) bool) time.Time {
	rs, err := gw.waitReplicasEvery(ctx, 2*time.Millisecond, timeout, func(rs []replicaView) bool {
		for _, r := range rs {
			if r.ID == id {
				return cond(r)
			}
		}
		return false
	})
	if err != nil || rs == nil {
		return time.Time{}
	}
	return time.Now()
}

func since(t, from time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%.0f ms", t.Sub(from).Seconds()*1e3)
}

func runKill(t *T) error {
	const rate = 1000.0
	const before, down, after = 2 * time.Second, 2 * time.Second, 2 * time.Second
	n := int(rate * (before + down + after).Seconds())
	sims, err := t.startSims(3, zeroLatency)
	if err != nil {
		return err
	}
	// A 1 s ejection, so that the restarted engine's return is decided by
	// its probes, not by what is left of a long ejection.
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		fastProbes(c)
		c.Health.EjectionBackoff = time.Second
	})
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, 512)
	victim, id := sims[0], replicaID(0)

	var killAt, outAt, restartAt, backAt time.Time
	var outView replicaView
	var restartErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if !sleepCtx(t.ctx, before) {
			return
		}
		killAt = time.Now()
		victim.Kill()
		outAt = waitFor(t.ctx, gw, id, 3*time.Second, func(r replicaView) bool {
			outView = r
			return !r.inRotation()
		})
		if !sleepCtx(t.ctx, down-time.Since(killAt)) {
			return
		}
		restartErr = victim.Restart()
		restartAt = time.Now()
		backAt = waitFor(t.ctx, gw, id, 5*time.Second, replicaView.inRotation)
	})
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("kill", i, 1, false) })
	wg.Wait()
	if err != nil {
		return err
	}
	if restartErr != nil {
		return fmt.Errorf("restart: %w", restartErr)
	}
	if killAt.IsZero() {
		return fmt.Errorf("the simulator was never killed")
	}
	var afterErrs, inFlightErrs, sentAfter int
	kinds := map[string]int{}
	var served time.Time // the first answer from the restarted engine
	for i := range l.answers {
		a := &l.answers[i]
		err := a.check(l.specs[i])
		if a.sent.After(killAt) {
			sentAfter++
		}
		switch {
		case err != nil && a.sent.After(killAt):
			afterErrs++
			addKind(kinds, err.Error())
		case err != nil:
			inFlightErrs++
			addKind(kinds, "in flight at the kill: "+err.Error())
		case a.replica == id && a.sent.After(restartAt) && (served.IsZero() || a.done.Before(served)):
			served = a.done
		}
	}
	how := "ejected by failed requests"
	if !outView.Healthy && !outView.Ejected {
		how = "marked down by probes"
	}
	t.Figf("%d requests at %.0f/s; killed after %s: out of rotation %s after the kill (%s); restarted %s later: in rotation again %s after the restart, first request served %s after",
		n, rate, before, since(outAt, killAt), how, down, since(backAt, restartAt), since(served, restartAt))
	t.Figf("errors: %d of %d sent after the kill, %d in flight at the kill", afterErrs, sentAfter, inFlightErrs)
	t.Checkf(afterErrs == 0, "%d of %d requests sent after the kill failed: %v", afterErrs, sentAfter, kinds)
	t.Checkf(!outAt.IsZero() && outAt.Sub(killAt) <= 500*time.Millisecond, "out of rotation %s after the kill, want ≤ 500 ms", since(outAt, killAt))
	t.Checkf(!backAt.IsZero() && backAt.Sub(restartAt) <= time.Second, "back in rotation %s after the restart, want ≤ 1 s", since(backAt, restartAt))
	t.Checkf(!served.IsZero(), "the restarted engine served nothing")
	return killStreams(t)
}

// killStreams kills a simulator while streams are in the middle of their
// bodies on it (issue 32, case 2): every stream it was serving must end in
// the API's error event and a properly ended body, none may hang, and the
// streams on the other engines must complete.
func killStreams(t *T) error {
	const streams, tokens = 60, 100
	// 100 tokens at 20 ms a step: each stream takes 2 s; the kill comes
	// 500 ms in, mid-body.
	sims, gw, err := roundRobinFleet(t, func(o *sim.Options) { o.Engine.Latency.DecodeToken = 20 * time.Millisecond })
	if err != nil {
		return err
	}
	victim, id := sims[0], replicaID(0)
	deadline := time.Now().Add(20 * time.Second)
	results := make([]streamResult, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() { results[i] = streamOrCut(t.ctx, gw.Addr, specN("killstream", i, tokens, true), deadline) })
	}
	if !sleepCtx(t.ctx, 500*time.Millisecond) {
		wg.Wait()
		return t.ctx.Err()
	}
	killAt := time.Now()
	victim.Kill()
	wg.Wait()
	var onVictim, cut, completed, slowest int
	var longest time.Duration
	kinds := map[string]int{}
	for i, r := range results {
		if r.replica == id {
			onVictim++
		}
		switch {
		case r.err != nil:
			addKind(kinds, r.replica+": "+r.err.Error())
		case r.cut:
			cut++
		default:
			completed++
		}
		if r.took > longest {
			longest, slowest = r.took, i
		}
	}
	t.Figf("%d streams of %d tokens over 3 simulators, one killed %s after they started: %d of them on it; %d ended in an error event, %d completed, %d failed otherwise; the longest took %s (stream %d)",
		streams, tokens, 500*time.Millisecond, onVictim, cut, completed, streams-cut-completed, longest.Round(time.Millisecond), slowest)
	t.Checkf(onVictim > 0 && cut == onVictim, "%d streams on the killed engine, %d of them ended in an error event", onVictim, cut)
	t.Checkf(len(kinds) == 0, "streams failed without an error event: %v", kinds)
	t.Checkf(time.Since(killAt) < 15*time.Second, "the streams took %s after the kill to end", time.Since(killAt).Round(time.Millisecond))
	return nil
}

// roundRobinFleet starts 3 simulators (their options edited by opt) and a
// gateway routing round robin over them, probing every 100 ms.
func roundRobinFleet(t *T, opt func(*sim.Options)) ([]*sim.Server, *gateway, error) {
	sims, err := t.startSims(3, opt)
	if err != nil {
		return nil, nil, err
	}
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		fastProbes(c)
		c.Routing.DefaultPolicy = "round_robin"
	})
	return sims, gw, err
}

func runHang(t *T) error {
	const rate = 400.0
	const before, total = time.Second, 3 * time.Second
	n := int(rate * total.Seconds())
	// Round robin, so that a third of the requests keep landing on the hung
	// replica until it is marked down.
	sims, gw, err := roundRobinFleet(t, zeroLatency)
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, 512)
	retries0, err := gw.metric("inferrail_upstream_retries_total")
	if err != nil {
		return err
	}
	victim, id := sims[0], replicaID(0)
	t.Cleanup(func() { victim.SetFault(sim.Fault{}) }) // releases what still hangs
	var hangAt, downAt time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		if !sleepCtx(t.ctx, before) {
			return
		}
		hangAt = time.Now()
		victim.SetFault(sim.Fault{Kind: sim.FaultHang})
		downAt = waitFor(t.ctx, gw, id, 3*time.Second, func(r replicaView) bool { return !r.Healthy })
	})
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("hang", i, 1, false) })
	wg.Wait()
	if err != nil {
		return err
	}
	if hangAt.IsZero() {
		return fmt.Errorf("the simulator never hung")
	}
	retries1, err := gw.metric("inferrail_upstream_retries_total")
	if err != nil {
		return err
	}
	failed, kinds := l.checkAll(nil)
	var fromVictim int
	var worst time.Duration
	for i := range l.answers {
		a := &l.answers[i]
		if !a.sent.After(hangAt) {
			continue
		}
		if a.replica == id {
			fromVictim++
		}
		worst = max(worst, a.done.Sub(a.sent))
	}
	moved := int(retries1 - retries0)
	t.Figf("%d requests at %.0f/s, round robin; hung after %s: marked down by probes %s later; %d waiting requests moved to another replica, the slowest answered %.0f ms after it was sent; %d errors",
		n, rate, before, since(downAt, hangAt), moved, worst.Seconds()*1e3, failed)
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	t.Checkf(moved > 0, "no request was moved off the hung replica")
	t.Checkf(fromVictim == 0, "%d requests sent after the hang were answered by the hung replica", fromVictim)
	t.Checkf(!downAt.IsZero() && downAt.Sub(hangAt) <= time.Second, "marked down %s after the hang, want ≤ 1 s", since(downAt, hangAt))
	t.Checkf(worst <= 1500*time.Millisecond, "a request took %.0f ms, want ≤ 1,500 ms", worst.Seconds()*1e3)
	return nil
}

// generation are the paths a fault that fails requests applies to; /health
// keeps answering, so probes still find every replica healthy.
var generation = []string{completionsPath, chatPath}

func runAllFail(t *T) error {
	const rate, phase = 500.0, 1500 * time.Millisecond
	const replicas = 4
	n := int(rate * phase.Seconds())
	sims, err := t.startSims(replicas, zeroLatency)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), fastProbes)
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, 512)
	setAll := func(f sim.Fault) {
		for _, s := range sims {
			s.SetFault(f)
		}
	}
	t.Cleanup(func() { setAll(sim.Fault{}) })

	// Watch the pool every 5 ms while the faults last.
	var (
		polls, maxEjected int
		minIn             = replicas
		pollErr           error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	every(&wg, stop, 5*time.Millisecond, func() {
		rs, err := gw.replicas()
		if err != nil {
			pollErr = err
			return
		}
		polls++
		ejected, in := 0, 0
		for _, r := range rs {
			if r.Ejected {
				ejected++
			}
			if r.inRotation() {
				in++
			}
		}
		maxEjected, minIn = max(maxEjected, ejected), min(minIn, in)
	})

	phases := []struct {
		name  string
		fault sim.Fault
	}{
		{"500", sim.Fault{Kind: sim.FaultFail, Status: 500, Paths: generation}},
		{"503", sim.Fault{Kind: sim.FaultFail, Status: 503, Paths: generation}},
		{"closed", sim.Fault{Kind: sim.FaultClose, Paths: generation}},
	}
	var noReplica, unanswered int
	for _, p := range phases {
		setAll(p.fault)
		l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("allfail-"+p.name, i, 1, false) })
		if err != nil {
			close(stop)
			wg.Wait()
			return err
		}
		statuses := map[int]int{}
		for _, a := range l.answers {
			if a.err != nil {
				unanswered++
				continue
			}
			statuses[a.status]++
			if bytes.Contains(a.body, []byte("No healthy replica")) {
				noReplica++
			}
		}
		t.Figf("engines answering %s: %d requests got %s", p.name, n, formatStatuses(statuses))
	}
	setAll(sim.Fault{})
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("allfail-after", i, 1, false) })
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	ejections, _ := gw.metric("inferrail_ejections_total")
	failed, kinds := l.checkAll(nil)
	t.Figf("%d ejections; at most %d of %d replicas ejected and at least %d in rotation over %d reads of /admin/replicas; %d answered \"no healthy replica\"; once the faults cleared %d of %d requests failed",
		int(ejections), maxEjected, replicas, minIn, polls, noReplica, failed, n)
	t.Checkf(pollErr == nil, "/admin/replicas: %v", pollErr)
	t.Checkf(maxEjected <= replicas/2, "%d of %d replicas ejected at once, want at most half", maxEjected, replicas)
	t.Checkf(minIn >= replicas-replicas/2, "only %d of %d replicas in rotation at one point", minIn, replicas)
	t.Checkf(noReplica == 0, "%d requests were told no replica is healthy: the pool emptied", noReplica)
	t.Checkf(unanswered == 0, "%d requests got no HTTP answer", unanswered)
	t.Checkf(ejections > 0, "no replica was ejected: the faults did not bite")
	t.Checkf(failed == 0, "%d of %d requests failed after the faults cleared: %v", failed, n, kinds)
	return nil
}

// formatStatuses renders a status histogram: "500 ×750".
func formatStatuses(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d ×%d", k, m[k])
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func runFlap(t *T) error {
	const rate = 1000.0
	total := pick(t, 10*time.Second, 4*time.Second)
	n := int(rate * total.Seconds())
	sims, err := t.startSims(3, zeroLatency)
	if err != nil {
		return err
	}
	// Probes every second, as by default, which cannot follow a replica
	// that flaps every 100 ms; and ejections of 100 to 200 ms instead of
	// 5 s to a minute, so that the flapping replica keeps coming back into
	// rotation and retries, not a long ejection, must keep clients whole.
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		c.Health.EjectionBackoff = 100 * time.Millisecond
		c.Health.MaxEjectionBackoff = 200 * time.Millisecond
	})
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, 512)
	retries0, err := gw.metric("inferrail_upstream_retries_total")
	if err != nil {
		return err
	}
	victim, id := sims[0], replicaID(0)
	t.Cleanup(func() { victim.SetFault(sim.Fault{}) })
	stop := make(chan struct{})
	var toggles int
	var wg sync.WaitGroup
	failing := false
	every(&wg, stop, 100*time.Millisecond, func() {
		failing = !failing
		toggles++
		if failing {
			victim.SetFault(sim.Fault{Kind: sim.FaultFail, Status: 503})
		} else {
			victim.SetFault(sim.Fault{})
		}
	})
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("flap", i, 1, false) })
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	retries1, _ := gw.metric("inferrail_upstream_retries_total")
	ejections, _ := gw.metric("inferrail_ejections_total")
	failed, kinds := l.checkAll(nil)
	byVictim := 0
	for _, a := range l.answers {
		if a.replica == id {
			byVictim++
		}
	}
	t.Figf("%d requests at %.0f/s while %s flipped %d times between healthy and 503 (/health included): %d served by it, %d retried elsewhere, %d ejections; %d client errors",
		n, rate, id, toggles, byVictim, int(retries1-retries0), int(ejections), failed)
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	return nil
}
