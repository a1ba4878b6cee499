package stress

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/sim/engine"
)

// leaveKind is when a client of the disconnect scenario goes away.
type leaveKind uint8

const (
	stayToEnd   leaveKind = iota // reads the whole stream
	leaveEarly                   // closes right after sending the request, before any answer
	leaveInHead                  // closes once the response head has arrived
	leaveMid                     // closes after some content events
)

// leavePlan is what client i of the disconnect scenario does.
type leavePlan struct {
	kind  leaveKind
	after int // leaveMid: content events read first
}

// planLeaves draws n plans from seed: a quarter read to the end, a
// twentieth leave before the head, the rest after the head or after 1 to
// tokens/2 events (so that the engine still has tokens to generate).
func planLeaves(seed uint64, n, tokens int) []leavePlan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]leavePlan, n)
	for i := range out {
		switch p := rng.IntN(100); {
		case p < 25:
			out[i] = leavePlan{kind: stayToEnd}
		case p < 30:
			out[i] = leavePlan{kind: leaveEarly}
		case p < 40:
			out[i] = leavePlan{kind: leaveInHead}
		default:
			out[i] = leavePlan{kind: leaveMid, after: 1 + rng.IntN(tokens/2)}
		}
	}
	return out
}

// leaveResult is what one client of the disconnect scenario saw.
type leaveResult struct {
	left     bool // it closed its connection before the stream ended
	headSeen bool // the response head had arrived when it left (or it stayed)
	err      error
	at       time.Time // when it closed or finished
}

// streamAndLeave sends spec to addr and follows plan.
func streamAndLeave(ctx context.Context, addr string, spec loadgen.Spec, plan leavePlan, deadline time.Time) (res leaveResult) {
	c, err := dialRaw(ctx, addr)
	if err != nil {
		res.err = err
		return res
	}
	defer func() {
		c.Close()
		res.at = time.Now()
	}()
	c.SetDeadline(deadline)
	if _, err := c.Write(postRequest(addr, spec.Path(), bodyFor(spec))); err != nil {
		res.err = err
		return res
	}
	if plan.kind == leaveEarly {
		res.left = true
		return res
	}
	resp, err := c.readResponse()
	if err != nil {
		res.err = fmt.Errorf("response head: %w", err)
		return res
	}
	// resp.Body is never closed: net/http's Close would read the rest of
	// the stream. Closing the connection (deferred above) is the leaving.
	res.headSeen = true
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		res.err = fmt.Errorf("status %d: %s", resp.StatusCode, trim(b, 160))
		return res
	}
	switch plan.kind {
	case stayToEnd:
		res.err = loadgen.CheckStream(resp.Body, spec, nil)
		return res
	case leaveInHead:
		res.left = true
		return res
	}
	sr := loadgen.NewSSEReader(resp.Body)
	for events := 0; events < plan.after; events++ {
		if _, _, err := sr.Next(); err != nil {
			res.err = fmt.Errorf("after %d events: %w", events, err)
			return res
		}
	}
	res.left = true
	return res
}

func runDisconnect(t *T) error {
	n, tokens := 1000, 48
	// Default latency (a token every 20 ms or more) and vLLM's default
	// --max-num-seqs 256, so that clients leave while their request is
	// waiting in the engine's queue as well as while it decodes.
	sims, err := t.startSims(3, nil)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), nil)
	if err != nil {
		return err
	}
	before, err := engineStats(sims)
	if err != nil {
		return err
	}
	disc0, err := gw.metric("inferrail_client_disconnects_total")
	if err != nil {
		return err
	}
	plans := planLeaves(8, n, tokens)
	results := make([]leaveResult, n)
	deadline := time.Now().Add(60 * time.Second)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			// Arrivals spread over half a second, so that some meet a full
			// engine and some a draining one.
			if !sleepCtx(t.ctx, time.Duration(i)*500*time.Millisecond/time.Duration(n)) {
				results[i].err = t.ctx.Err()
				return
			}
			results[i] = streamAndLeave(t.ctx, gw.Addr, specN("disconnect", i, tokens, true), plans[i], deadline)
		})
	}
	close(start)
	wg.Wait()

	var stayed, leftEarly, leftAfterHead, failed int
	var last time.Time // the last client to leave or finish
	kinds := map[string]int{}
	for _, r := range results {
		switch {
		case r.err != nil:
			failed++
			addKind(kinds, r.err.Error())
		case !r.left:
			stayed++
		case r.headSeen:
			leftAfterHead++
		default:
			leftEarly++
		}
		if r.at.After(last) {
			last = r.at
		}
	}

	// Every engine must come back to idle: nothing running or waiting, no
	// KV block held by a request; and the gateway must hold no lease.
	var after []engine.Stats
	quiet := time.Now()
	for {
		after, err = engineStats(sims)
		if err != nil {
			return err
		}
		busy := 0
		for _, s := range after {
			busy += s.Running + s.Waiting + s.UsedBlocks
		}
		if busy == 0 || time.Since(quiet) > 5*time.Second {
			break
		}
		if !sleepCtx(t.ctx, 10*time.Millisecond) {
			return t.ctx.Err()
		}
	}
	settled := time.Since(last)
	rs, leaseErr := gw.waitReplicas(t.ctx, 5*time.Second, idle)
	disc1, err := gw.metric("inferrail_client_disconnects_total")
	if err != nil {
		return err
	}
	var aborted, finished, running, waiting, blocks int64
	for i := range sims {
		aborted += after[i].FinishedByReason["abort"] - before[i].FinishedByReason["abort"]
		finished += after[i].FinishedByReason["length"] - before[i].FinishedByReason["length"]
		running += int64(after[i].Running)
		waiting += int64(after[i].Waiting)
		blocks += int64(after[i].UsedBlocks)
	}
	left := leftEarly + leftAfterHead
	t.Figf("%d streams of %d tokens: %d read to the end, %d disconnected (%d before the response head, %d after it, mid-stream or not); engines aborted %d and finished %d",
		n, tokens, stayed, left, leftEarly, leftAfterHead, aborted, finished)
	t.Figf("engines idle (0 running, 0 waiting, 0 blocks held) %.0f ms after the last client left or finished; gateway disconnects counted %d; leases held after: %d",
		settled.Seconds()*1e3, int(disc1-disc0), leases(rs))
	t.Checkf(failed == 0, "%d clients saw an error: %v", failed, kinds)
	t.Checkf(finished == int64(stayed), "engines finished %d requests, %d clients read to the end", finished, stayed)
	// A client that left after the head was in the engine: it must have been
	// aborted. One that left before may have been stopped at the gateway.
	t.Checkf(aborted >= int64(leftAfterHead) && aborted <= int64(left),
		"engines aborted %d requests; %d clients left after the head, %d in all", aborted, leftAfterHead, left)
	t.Checkf(running+waiting+blocks == 0, "engines still hold %d running, %d waiting, %d KV blocks", running, waiting, blocks)
	t.Checkf(leaseErr == nil, "gateway leases: %v", leaseErr)
	return nil
}

// leases is the in-flight and pending requests the gateway holds.
func leases(rs []replicaView) int {
	n := 0
	for _, r := range rs {
		n += r.InFlight + r.Pending
	}
	return n
}
