package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/admin"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// reloader rereads the config file and applies what may change while the
// gateway runs (see config.RestartOnly): to the fleet (routing, static
// replicas) and the front end (retry, logging.log_prompts). It counts
// every attempt in inferrail_config_reloads_total{result} and publishes
// inferrail_config_generation.
type reloader struct {
	path string
	env  []string
	fl   *fleet.Fleet
	fe   *frontend.Server
	met  *telemetry.Registry
	log  *slog.Logger

	mu   sync.Mutex // serializes reloads; guards last
	last []byte     // the file as last read

	cur atomic.Pointer[config.Config]
	gen atomic.Uint64

	applied, unchanged, rejected *metrics.Counter
}

func newReloader(path string, cfg *config.Config, fl *fleet.Fleet, fe *frontend.Server, met *telemetry.Registry, log *slog.Logger) *reloader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set := metrics.NewSet()
	r := &reloader{path: path, env: os.Environ(), fl: fl, fe: fe, met: met, log: log,
		applied:   set.NewCounter(`inferrail_config_reloads_total{result="applied"}`),
		unchanged: set.NewCounter(`inferrail_config_reloads_total{result="unchanged"}`),
		rejected:  set.NewCounter(`inferrail_config_reloads_total{result="rejected"}`),
	}
	set.NewGauge(`inferrail_config_generation`, func() float64 { return float64(r.gen.Load()) })
	r.cur.Store(cfg)
	r.gen.Store(1)
	if path != "" {
		r.last, _ = r.read() // the file as serve loaded it, give or take a race
	}
	if met != nil {
		met.Include(set)
	}
	return r
}

// Current returns the config in effect and its generation (1 at startup).
func (r *reloader) Current() (*config.Config, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Load(), r.gen.Load()
}

// Reload rereads the file and applies it (POST /admin/reload, SIGHUP).
func (r *reloader) Reload() admin.Reload {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.read()
	if err != nil {
		return r.reject(nil, err)
	}
	r.last = b
	return r.apply(b)
}

// poll rereads the file and applies it if its bytes changed since the last
// read: a file left alone costs no attempt.
func (r *reloader) poll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := r.read()
	if err != nil {
		if r.last != nil {
			r.last = nil
			r.reject(nil, err)
		}
		return
	}
	if r.last != nil && string(b) == string(r.last) {
		return
	}
	r.last = b
	r.apply(b)
}

func (r *reloader) read() ([]byte, error) {
	f, err := os.Open(r.path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, config.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", r.path, err)
	}
	return b, nil
}

// apply parses doc and applies it. Under mu.
func (r *reloader) apply(doc []byte) admin.Reload {
	next, err := config.Parse(doc, r.env)
	if err != nil {
		return r.reject(nil, fmt.Errorf("config %s: %w", r.path, err))
	}
	prev := r.cur.Load()
	changed := config.Diff(prev, next)
	if len(changed) == 0 {
		r.unchanged.Inc()
		return admin.Reload{Result: "unchanged", Generation: r.gen.Load()}
	}
	if ro := config.RestartOnly(prev, next); len(ro) > 0 {
		return r.reject(changed, fmt.Errorf("config %s: needs a restart, refused whole: %s", r.path, strings.Join(ro, ", ")))
	}
	if err := r.fl.Reconfigure(next); err != nil {
		return r.reject(changed, err)
	}
	r.fe.SetConfig(next)
	r.cur.Store(next)
	gen := r.gen.Add(1)
	r.applied.Inc()
	if r.met != nil {
		for _, m := range next.Models {
			for _, a := range r.fl.Arms(m.Name) {
				r.met.ModelPolicy(m.Name, a.Policy, a.Percent)
			}
			for p := range prev.RoutingFor(&m).Split {
				if !slices.ContainsFunc(r.fl.Arms(m.Name), func(a policy.Arm) bool { return a.Policy == p }) {
					r.met.ModelPolicyOff(m.Name, p)
				}
			}
		}
	}
	r.log.Info("config reloaded", "path", r.path, "generation", gen, "changed", changed)
	return admin.Reload{Result: "applied", Generation: gen, Changed: changed}
}

// reject counts and logs a refused reload; the running config stays.
func (r *reloader) reject(changed []string, err error) admin.Reload {
	r.rejected.Inc()
	r.log.Error("config reload refused; the running config stays", "err", err)
	return admin.Reload{Result: "rejected", Generation: r.gen.Load(), Changed: changed, Error: err.Error()}
}

// run polls the file every interval (never at 0) and reloads at once on
// every value from hup, until ctx ends.
func (r *reloader) run(ctx context.Context, every time.Duration, hup <-chan os.Signal) {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			r.poll()
		case <-hup:
			r.Reload()
		}
	}
}
