package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
	"github.com/inferrail/inferrail/model/shadow"
)

// retireGrace is how long a routing actor a reload replaced keeps
// answering, on top of routing.estimate_deadline: a Pick that read the
// previous table just before the swap still reaches it and is answered.
const retireGrace = time.Second

// reconfigureTimeout bounds Reconfigure's wait for the fleet actor, which
// never blocks: only a fleet actor that keeps panicking could miss it.
const reconfigureTimeout = 10 * time.Second

// ErrRestartOnly is wrapped by Reconfigure's error for a config whose model
// list differs from the running one.
var ErrRestartOnly = errors.New("fleet: needs a restart")

// plan builds the table for cfg and the routing actors it needs, reusing
// from prev (nil at Start) every arm whose key did not change, and every
// trial worker whose trialKey did not change. It returns every routing
// actor of the new table (the reused ones with their pid, the new ones
// without) and the new trial workers, not started yet.
func (f *Fleet) plan(cfg *config.Config, prev *table) (*table, []*modelState, []*trialWorker, error) {
	seed := cfg.Routing.Seed
	if seed == 0 {
		seed = f.seed
	}
	suffix := ""
	if prev != nil {
		suffix = "-g" + strconv.Itoa(f.gen+1) // free while the replaced actors retire
	}
	t := &table{byName: make(map[string]*model), estimateDeadline: cfg.Routing.EstimateDeadline}
	var states []*modelState
	var workers []*trialWorker
	for i := range cfg.Models {
		m := &cfg.Models[i]
		r := cfg.RoutingFor(m)
		split, err := policy.NewSplit(r.Split)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("fleet: model %s: %w", m.Name, err)
		}
		var old *model
		if prev != nil {
			old = prev.models[i]
		}
		fm := &model{name: m.Name, aliases: slices.Clone(m.Aliases), split: split,
			trialKey: fmt.Sprintf("%q|%+v|%t", r.Shadow, r.CostModel, f.opts.extraTrial != nil)}
		trialAware := false
		var trials []*profile
		for _, name := range r.Shadow {
			pr, err := profileOf(cfg, m, name)
			if err != nil {
				return nil, nil, nil, err
			}
			trials = append(trials, pr)
			trialAware = trialAware || pr.estimates()
			fm.trialKey += "|" + pr.key
		}
		if old != nil && old.trialKey == fm.trialKey {
			fm.trials = old.trials
		} else {
			var sps []policy.Policy
			var srngs []*rand.Rand
			var specs []shadow.Shadow
			for k, pr := range trials {
				sp := pr.trial(seed, i, k)
				p, rng, err := sp.Build()
				if err != nil {
					return nil, nil, nil, fmt.Errorf("fleet: model %s: %w", m.Name, err)
				}
				sps, srngs, specs = append(sps, p), append(srngs, rng), append(specs, sp)
			}
			if f.opts.extraTrial != nil {
				p := f.opts.extraTrial()
				sp := shadow.Shadow{Spec: policy.Spec{Name: p.Name()}, Seed: seed, Stream: trialStream(i, len(sps))}
				sps, srngs, specs = append(sps, p), append(srngs, sp.Rand()), append(specs, sp)
			}
			if len(sps) > 0 {
				// The generation this plan makes: 1 at Start, as the
				// gateway's reloader counts.
				gen := uint64(f.gen) + 1
				if prev != nil {
					gen++
				}
				fm.trials = newTrialWorker(m.Name, gen, sps, srngs, specs, costModel(r.CostModel),
					f.opts.TrialQueue, f.opts.TrialLog, f.st.set, f.log)
				workers = append(workers, fm.trials)
			}
		}
		var profiles []*profile
		for _, sa := range split.Arms() {
			pr, err := profileOf(cfg, m, sa.Policy)
			if err != nil {
				return nil, nil, nil, err
			}
			sig := pr.signals()
			a := &arm{policy: sa.Policy, percent: sa.Percent, estimates: pr.estimates() || trialAware,
				load: sig&sched.SignalLoad != 0}
			fm.arms = append(fm.arms, a)
			fm.estimates = fm.estimates || a.estimates
			fm.tokens = fm.tokens || a.estimates || sig&sched.SignalTokens != 0
			profiles = append(profiles, pr)
		}
		f.warnKVEvents(cfg, m, append(slices.Clone(profiles), trials...))
		for j, a := range fm.arms {
			records := fm.estimates && !a.estimates
			a.key = fmt.Sprintf("%s|estimates=%t|load=%t|records=%t|cost=%+v|fanout=%d|seed=%d|shadows=%s",
				profiles[j].key, a.estimates, a.load, records, r.CostModel, cfg.Routing.EstimateFanout, seed, fm.trialKey)
			if old != nil {
				if oa, ok := old.armNamed(a.policy); ok && oa.key == a.key {
					a.routing, a.ms = oa.routing, oa.ms
					states = append(states, oa.ms)
					continue
				}
			}
			build := profiles[j].build
			if f.opts.ArmPolicy != nil {
				build = func() (policy.Policy, error) { return f.opts.ArmPolicy(cfg, m, a.policy) }
			}
			p, err := build()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("fleet: model %s: %w", m.Name, err)
			}
			// The first arm draws from the stream a model without a split
			// draws from, so a split of one policy routes as that policy.
			stream, actorName := uint64(i), "routing-"+strconv.Itoa(i)
			if j > 0 {
				stream, actorName = stream|uint64(j)<<32, actorName+"-"+strconv.Itoa(j)
			}
			src := rand.NewPCG(seed, stream)
			a.ms = &modelState{name: m.Name, actorName: actorName + suffix, arm: a, policy: p,
				rng: rand.New(src), src: src, estimates: a.estimates, load: a.load, records: records,
				costModel: costModel(r.CostModel), auto: r.CostModel.Auto, fanout: cfg.Routing.EstimateFanout, trials: fm.trials}
			states = append(states, a.ms)
		}
		t.models = append(t.models, fm)
		t.byName[m.Name] = fm
		for _, al := range m.Aliases {
			t.byName[al] = fm
		}
	}
	return t, states, workers, nil
}

// warnKVEvents logs, once per config, a profile of model m that reads
// the KV-event index (precise-prefix-cache-producer) while no replica of
// the model follows its engine's KV events: it routes on the shadow index's
// prediction instead.
func (f *Fleet) warnKVEvents(cfg *config.Config, m *config.Model, profiles []*profile) {
	for _, r := range cfg.Replicas {
		if r.KVEvents != "" && slices.Contains(r.Models, m.Name) {
			return
		}
	}
	for _, g := range cfg.Discovery.DNS {
		if g.KVEventsPort != 0 && slices.Contains(g.Models, m.Name) {
			return
		}
	}
	for _, p := range profiles {
		if p.signals()&sched.SignalKVEvents != 0 {
			f.log.Warn("fleet: the profile reads the engines' KV events, and no replica of the model sets kv_events (or a DNS group kv_events_port): "+
				"it routes on the shadow index's prediction", "model", m.Name, "policy", p.name)
			return
		}
	}
}

// logTrials writes the shadow log's config line for the new workers, all
// of one generation, before they start: it precedes their decisions.
func (f *Fleet) logTrials(workers []*trialWorker) {
	if f.opts.TrialLog == nil || len(workers) == 0 {
		return
	}
	l := &shadow.Line{Kind: shadow.KindConfig, Gen: workers[0].gen}
	for _, w := range workers {
		l.Models = append(l.Models, shadow.Shadows{Model: w.model, CostModel: w.cm, Shadows: w.specs})
	}
	if err := f.opts.TrialLog.Put(f.ctx, l); err != nil {
		f.log.Error("fleet: shadow log: config line not written; the generation's decisions will not replay", "generation", l.Gen, "err", err)
	}
}

// startTrials starts w's goroutine, which runs until the fleet stops or
// w is retired.
func (f *Fleet) startTrials(w *trialWorker) {
	ctx, cancel := context.WithCancel(f.ctx)
	w.stop = cancel
	f.goroutines.Go(func() { w.run(ctx) })
}

// Reconfigure applies cfg to the running fleet without dropping a request:
// routing (the routing section, each model's policy, split, shadow,
// cost_model and aliases) and the static replicas. An arm whose policy and
// settings did not change keeps its routing actor, and with it the
// policy's state (a round robin rotation, a hot prefix sketch, a session
// table); a model whose shadow policies did not change keeps their worker.
// Static replicas whose config did not change keep their actor, health and
// counters; new ones join as DNS members do, and removed or changed ones
// leave as DNS members do: requests already on them finish there.
//
// Picks that read the previous table are still answered: the routing
// actors it replaced stop a grace period after the swap. Reconfigure does
// not look at the sections built at startup (server, upstream, discovery,
// health, load, index, tokenizer, observability): config.RestartOnly is
// the caller's check. A config whose model list differs fails with
// ErrRestartOnly. On error nothing changed.
func (f *Fleet) Reconfigure(cfg *config.Config) error {
	f.reconfigMu.Lock()
	defer f.reconfigMu.Unlock()
	if f.stopped.Load() {
		return ErrStopped
	}
	prev := f.table.Load()
	if len(cfg.Models) != len(prev.models) {
		return fmt.Errorf("%w: the model list changed", ErrRestartOnly)
	}
	for i, m := range prev.models {
		if cfg.Models[i].Name != m.name {
			return fmt.Errorf("%w: the model list changed", ErrRestartOnly)
		}
	}
	seen := make(map[string]bool, len(cfg.Replicas))
	for _, r := range cfg.Replicas {
		if seen[r.ID] {
			return fmt.Errorf("fleet: replica id %q is used twice", r.ID)
		}
		seen[r.ID] = true
	}
	t, states, workers, err := f.plan(cfg, prev)
	if err != nil {
		return err
	}
	msg := &reconfigure{models: states, replicas: slices.Clone(cfg.Replicas), done: make(chan error, 1)}
	f.sys.Root.Send(f.pid, msg)
	timer := time.NewTimer(reconfigureTimeout)
	defer timer.Stop()
	select {
	case err = <-msg.done:
	case <-timer.C:
		err = errors.New("fleet: reconfigure: the fleet actor did not answer")
	}
	if err != nil {
		return err
	}
	for _, m := range t.models {
		for _, a := range m.arms {
			a.routing = a.ms.pid
		}
	}
	f.logTrials(workers)
	for _, w := range workers {
		f.startTrials(w)
	}
	f.table.Store(t)
	f.gen++

	// What the new table no longer uses retires after the grace period.
	var oldStates []*modelState
	var oldWorkers []*trialWorker
	for i, m := range prev.models {
		for _, a := range m.arms {
			if !slices.Contains(states, a.ms) {
				oldStates = append(oldStates, a.ms)
			}
		}
		if m.trials != nil && m.trials != t.models[i].trials {
			oldWorkers = append(oldWorkers, m.trials)
		}
	}
	if len(oldStates) == 0 && len(oldWorkers) == 0 {
		return nil
	}
	grace := retireGrace + prev.estimateDeadline
	f.goroutines.Go(func() {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-f.ctx.Done():
			return // Stop stops every actor and worker
		case <-timer.C:
		}
		f.sys.Root.Send(f.pid, &retire{models: oldStates})
		for _, w := range oldWorkers {
			w.stop()
		}
	})
	return nil
}

// reconfigure installs a reload's routing actors and static replicas:
// it spawns the new routing actors, replaces the static members that
// changed (state.apply), publishes the membership to every routing actor,
// and stops the replica actors that left. The replaced routing actors keep running until
// retire.
func (a *fleetActor) reconfigure(ctx actor.Context, m *reconfigure) {
	st := a.st
	for _, r := range m.replicas {
		if e, ok := st.entries[r.ID]; ok && e.owner != ownerStatic {
			m.done <- fmt.Errorf("fleet: replica id %q is a member of %s", r.ID, e.owner)
			return
		}
	}
	var spawned []*modelState
	for _, ms := range m.models {
		if ms.pid != nil {
			continue
		}
		if err := a.spawnRouting(ctx, ms); err != nil {
			for _, s := range spawned {
				ctx.Stop(s.pid)
				s.pid = nil
			}
			m.done <- fmt.Errorf("fleet: spawn routing actor for model %s: %w", ms.name, err)
			return
		}
		spawned = append(spawned, ms)
	}
	st.models = m.models

	eps := make([]Endpoint, len(m.replicas))
	for i, r := range m.replicas {
		eps[i] = staticEndpoint(r)
	}
	// As for DNS members: those that stay keep their actor, and requests
	// running on one that left finish there. Every routing actor hears of
	// the membership, the new ones too.
	c := st.apply(ownerStatic, st.static, eps)
	st.static = c.ids
	a.commit(ctx, c, nil)
	if len(c.joined) > 0 || len(c.leftIDs) > 0 {
		st.log.Info("fleet: static replicas changed", "members", len(c.ids), "joined", c.joined, "left", c.leftIDs)
	}
	m.done <- nil
}
