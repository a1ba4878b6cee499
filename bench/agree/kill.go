package agree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// KillOptions configures the real-time kill run (issue 17's first fault):
// two gateway processes in front of the same simulators, a client spreading
// an open-loop load over them round robin, one gateway killed with SIGKILL
// part way through.
type KillOptions struct {
	// Start starts one gateway process serving the config file at path and
	// returns it; StartGateway by default. Tests start their own binary.
	Start func(ctx context.Context, path string) (*loadgen.Proc, error)
	// Bin is the inferrail binary StartGateway runs.
	Bin      string
	Rate     float64       // requests per second over both instances
	Duration time.Duration // of arrivals
	KillAt   time.Duration // from the first arrival
	// Events makes the simulators publish KV events and every gateway
	// follow every engine's.
	Events    bool
	MaxTokens int // per request; streamed
	Log       io.Writer
	// Edit, when set, edits both gateways' config.
	Edit func(*config.Config)
}

// KillResult is what the kill run measured. Instance 1 is the one killed.
type KillResult struct {
	Sent, OK int
	// InFlight counts the requests instance 1 had been sent and not yet
	// answered in full when it was killed: the most that may fail.
	InFlight int
	// Failed counts the requests that failed, by the instance they were
	// sent to; FailedLate those of instance 1's that were sent after the
	// kill, FailedEarly those already answered by then (both must be 0).
	Failed                  [2]int
	FailedLate, FailedEarly int
	// FailedOver counts, by the instance they were meant for, the requests
	// the client sent to the other instance after they failed before any
	// response header, as a load balancer retrying connect failures and
	// resets would.
	FailedOver [2]int
	// ServedAfter counts instance 0's answers to requests sent after the
	// kill.
	ServedAfter int
	// P99Before and P99After are the p99 latencies of the requests that
	// succeeded, sent before and after the kill.
	P99Before, P99After time.Duration
	ErrorKinds          map[string]int
	Achieved            float64 // send rate achieved
}

// Kill runs the kill run and returns what it measured.
func Kill(ctx context.Context, o KillOptions) (KillResult, error) {
	var res KillResult
	if o.Rate <= 0 || o.Duration <= 0 || o.KillAt <= 0 || o.KillAt >= o.Duration {
		return res, fmt.Errorf("kill run: want rate > 0 and 0 < kill-at < duration")
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 8
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Start == nil {
		o.Start = func(ctx context.Context, path string) (*loadgen.Proc, error) { return StartGateway(ctx, o.Bin, path) }
	}
	dir, err := os.MkdirTemp("", "inferrail-kill-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	opts := fastSimOptions(o.Events)
	sims, err := sim.StartN(3, opts)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()

	var addrs [2]string
	var procs [2]*loadgen.Proc
	defer func() {
		for _, p := range procs {
			if p != nil && p.Alive() {
				p.Stop()
			}
		}
	}()
	for k := range addrs {
		cfg, addr, err := killConfig(sims, opts, o.Events, o.Edit)
		if err != nil {
			return res, err
		}
		if procs[k], err = startConfigured(ctx, o.Start, dir, k, cfg, addr); err != nil {
			return res, err
		}
		addrs[k] = addr
		fmt.Fprintf(o.Log, "kill run: gateway %d pid %d on %s\n", k, procs[k].Pid, addr)
	}
	// Both gateways must see every replica healthy before the load starts.
	for _, a := range addrs {
		if err := waitReady(ctx, "http://"+a+"/v1/models"); err != nil {
			return res, err
		}
	}

	clients := [2]*http.Client{}
	for k := range clients {
		clients[k] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0}}
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	prompts := killPrompts()
	n := int(o.Rate * o.Duration.Seconds())
	sched := loadgen.Schedule{Rate: o.Rate, N: n}

	// Everything the requests record, by request index.
	sentTo := make([]int, n)      // the instance the request was meant for
	servedBy := make([]int, n)    // the instance that answered (-1: none)
	sentAfter := make([]bool, n)  // sent after the kill
	doneBefore := make([]bool, n) // answered in full before the kill
	// Guarded by mu: set before the SIGKILL and once it is dead; the
	// requests sent to each instance and not finished; the kill's snapshot.
	var mu sync.Mutex
	var dying, killed bool
	var outstanding [2]int
	var inFlight, sentDying int
	var failedOver [2]atomic.Int64

	// send sends spec to instance k; early is set when the request failed
	// before any response header arrived.
	send := func(ctx context.Context, k int, spec loadgen.Spec) (early bool, err error) {
		body := loadgen.AppendBody(nil, opts.Model, spec)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addrs[k]+spec.Path(), bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := clients[k].Do(req)
		if err != nil {
			return true, err
		}
		defer resp.Body.Close()
		return false, loadgen.Check(resp, spec, nil)
	}
	killTimer := time.AfterFunc(o.KillAt, func() {
		// What it has not answered in full when it is killed, and what it
		// is sent until it is seen dead: the requests that may fail.
		mu.Lock()
		dying = true
		inFlight = outstanding[1]
		mu.Unlock()
		procs[1].Kill()
		mu.Lock()
		killed = true
		inFlight += sentDying
		held := inFlight
		mu.Unlock()
		fmt.Fprintf(o.Log, "kill run: gateway 1 killed with %d requests in flight\n", held)
	})
	defer killTimer.Stop()
	result, err := loadgen.RunOpenLoop(ctx, sched, func(ctx context.Context, i int) error {
		k := i % 2
		sentTo[i], servedBy[i] = k, -1
		spec := loadgen.Spec{Chat: true, Stream: true, Usage: true, MaxTokens: o.MaxTokens,
			Prompt: prompts[i%len(prompts)] + " question " + strconv.Itoa(i)}
		mu.Lock()
		sentAfter[i] = killed
		if k == 1 && dying && !killed {
			sentDying++
		}
		outstanding[k]++
		mu.Unlock()
		early, err := send(ctx, k, spec)
		mu.Lock()
		outstanding[k]--
		doneBefore[i] = !dying
		mu.Unlock()
		if err != nil && early && ctx.Err() == nil {
			// As Envoy with retry_on "connect-failure,reset" does, the
			// client retries once on the other instance a request that
			// failed before any response header: nothing of it reached
			// the user.
			failedOver[k].Add(1)
			k = 1 - k
			_, err = send(ctx, k, spec)
		}
		if err == nil {
			servedBy[i] = k
		}
		return err
	})
	if err != nil {
		return res, err
	}
	killTimer.Stop()
	mu.Lock()
	res.InFlight, res.Sent = inFlight, n
	mu.Unlock()
	res.FailedOver = [2]int{int(failedOver[0].Load()), int(failedOver[1].Load())}
	res.ErrorKinds, res.Achieved = map[string]int{}, result.AchievedRate()
	var before, after []time.Duration
	for i, e := range result.Errs {
		if e != nil {
			res.Failed[sentTo[i]]++
			if msg := fmt.Sprintf("instance %d: %.160s", sentTo[i], e.Error()); len(res.ErrorKinds) < 20 || res.ErrorKinds[msg] > 0 {
				res.ErrorKinds[msg]++
			}
			if sentTo[i] == 1 && sentAfter[i] {
				res.FailedLate++
			}
			if doneBefore[i] {
				res.FailedEarly++
			}
			continue
		}
		res.OK++
		if sentAfter[i] {
			after = append(after, result.Latency[i])
			if servedBy[i] == 0 {
				res.ServedAfter++
			}
		} else {
			before = append(before, result.Latency[i])
		}
	}
	res.P99Before, res.P99After = loadgen.Percentile(before, 99), loadgen.Percentile(after, 99)
	return res, nil
}

// Check reports what the kill run promises: instance 0 failed nothing,
// instance 1 failed no more than it had in flight and nothing sent after it
// died, and instance 0 served the traffic after the kill.
func (r KillResult) Check() error {
	var errs []error
	if r.Failed[0] > 0 || r.FailedOver[0] > 0 {
		errs = append(errs, fmt.Errorf("the surviving instance failed %d requests (%d more before a header, retried)", r.Failed[0], r.FailedOver[0]))
	}
	if r.Failed[1] > r.InFlight {
		errs = append(errs, fmt.Errorf("the killed instance failed %d requests with %d in flight", r.Failed[1], r.InFlight))
	}
	if r.FailedLate > 0 || r.FailedEarly > 0 {
		errs = append(errs, fmt.Errorf("%d requests sent after the kill and %d answered before it failed", r.FailedLate, r.FailedEarly))
	}
	if r.ServedAfter == 0 {
		errs = append(errs, errors.New("nothing was served after the kill"))
	}
	return errors.Join(errs...)
}

// WriteKill writes r as Markdown.
func WriteKill(w io.Writer, o KillOptions, r KillResult) error {
	ev := "off"
	if o.Events {
		ev = "on"
	}
	verdict := "met"
	if err := r.Check(); err != nil {
		verdict = "missed: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	_, err := fmt.Fprintf(w, "| rate | duration | kill at | KV events | sent | ok | in flight at kill | failed (survivor) | failed (killed) | retried elsewhere (killed) | p99 before | p99 after | achieved rate | verdict |\n"+
		"|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"+
		"| %.0f/s | %s | %s | %s | %d | %d | %d | %d | %d | %d | %s | %s | %.0f/s | %s |\n",
		o.Rate, o.Duration, o.KillAt, ev, r.Sent, r.OK, r.InFlight, r.Failed[0], r.Failed[1], r.FailedOver[1],
		r.P99Before.Round(time.Millisecond), r.P99After.Round(time.Millisecond), r.Achieved, verdict)
	if err == nil && len(r.ErrorKinds) > 0 {
		fmt.Fprintln(w, "\nErrors:")
		for msg, c := range r.ErrorKinds {
			fmt.Fprintf(w, "- %d × %s\n", c, msg)
		}
	}
	return err
}

// startConfigured writes cfg, gateway k's, into dir and starts a gateway
// serving it with start, and waits until it answers on addr's /health. The
// caller stops the process it returns, also on an error after the start.
func startConfigured(ctx context.Context, start func(context.Context, string) (*loadgen.Proc, error),
	dir string, k int, cfg *config.Config, addr string) (*loadgen.Proc, error) {
	b, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "gateway-"+strconv.Itoa(k)+".yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	p, err := start(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("gateway %d: %w", k, err)
	}
	if err := loadgen.WaitHealthy(ctx, p, "http://"+addr+"/health", 10*time.Second); err != nil {
		return p, fmt.Errorf("gateway %d: %w", k, err)
	}
	return p, nil
}

// fastSimOptions are the simulators of the real-time runs: engines fast
// enough that three serve 1,000 requests a second with room to spare, as
// the fleet a load balancer fronts would (the runs measure the gateways,
// not an overloaded engine), on loopback ports of their own, reporting
// their prefix cache hits in usage, and with events publishing KV events
// on endpoints they bind.
func fastSimOptions(events bool) sim.Options {
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.EnablePromptTokensDetails = true
	opts.Engine.Latency.PrefillToken = 2 * time.Microsecond
	opts.Engine.Latency.PrefillFixed = time.Millisecond
	opts.Engine.Latency.DecodeToken = 2 * time.Millisecond
	if events {
		opts.KVEventsConfig = `{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:0", "replay_endpoint": "tcp://127.0.0.1:0"}`
		opts.KVEventsBind = true
	}
	return opts
}

// StartGateway runs `bin serve --config path`.
func StartGateway(ctx context.Context, bin, path string) (*loadgen.Proc, error) {
	return loadgen.Start(ctx, loadgen.Command{Name: "gateway", Bin: bin, Args: []string{"serve", "--config", path}})
}

// killConfig is one gateway's config in front of sims: cost_model on the
// simulators' tokenizer, with their KV events when events is set, on a
// loopback port of its own, then edited by edit when set.
func killConfig(sims []*sim.Server, opts sim.Options, events bool, edit func(*config.Config)) (*config.Config, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	cfg := config.Default()
	cfg.Server.Listen, cfg.Server.AdminListen = addr, "127.0.0.1:0"
	cfg.Routing.DefaultPolicy = "cost_model"
	m := config.NewModel(opts.Model, "sim")
	m.Tokenizer, m.BlockSize = tokenize.Sim, opts.Engine.BlockSize
	cfg.Models = []config.Model{m}
	for i, s := range sims {
		r := config.NewReplica("sim-"+strconv.Itoa(i), s.URL(), opts.Model)
		if events {
			r.KVEvents, r.KVEventsReplay = s.EventEndpoints()
		}
		cfg.Replicas = append(cfg.Replicas, r)
	}
	if edit != nil {
		edit(cfg)
	}
	return cfg, addr, cfg.Validate()
}

// killPrompts are twelve long shared prefixes, as issue 17's fleet serves.
func killPrompts() []string {
	out := make([]string, 12)
	for i := range out {
		var b strings.Builder
		for w := range 300 {
			fmt.Fprintf(&b, "p%dw%d ", i, w)
		}
		out[i] = b.String()
	}
	return out
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
