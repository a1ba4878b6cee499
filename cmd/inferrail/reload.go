package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/config/mergepatch"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/admin"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// reloader rereads the config file and applies what may change while the
// gateway runs (see config.RestartOnly): to the fleet (routing, static
// replicas) and the front end (retry, flow_control, rate_limits,
// logging.log_prompts). It also applies
// JSON merge patches to the config in effect (PATCH /admin/config), leaving
// the file alone: the file's next edit replaces the patched config. It
// counts every attempt, file or patch, in
// inferrail_config_reloads_total{result} and publishes
// inferrail_config_generation.
type reloader struct {
	path string
	env  []string
	fl   *fleet.Fleet
	fe   interface{ SetConfig(*config.Config) }
	met  *telemetry.Registry
	log  *slog.Logger
	// auth, when set, gets every config put in effect, and rereads its
	// files on each Reload.
	auth *auth.Guard

	mu   sync.Mutex // serializes reloads and patches; guards last and patched
	last []byte     // the file as last read
	// patched is set while the config in effect is a patch of the file's
	// (PATCH /admin/config) that no edit of the file has replaced yet.
	patched bool

	cur atomic.Pointer[config.Config]
	gen atomic.Uint64

	applied, unchanged, rejected *metrics.Counter
}

func newReloader(path string, cfg *config.Config, fl *fleet.Fleet, fe interface{ SetConfig(*config.Config) }, met *telemetry.Registry, log *slog.Logger) *reloader {
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
// While a patch is in effect, a file whose bytes did not change since it
// was last read is not applied: the patch stays, and the answer is
// unchanged, patched. Only an edit of the file replaces a patch.
func (r *reloader) Reload() admin.Reload {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.auth != nil {
		defer r.auth.Reload()
	}
	b, err := r.read()
	if err != nil {
		return r.reject(nil, err)
	}
	if r.patched && r.last != nil && bytes.Equal(b, r.last) {
		r.unchanged.Inc()
		return admin.Reload{Result: "unchanged", Generation: r.gen.Load(), Patched: true}
	}
	r.last = b
	return r.apply(b)
}

// Patch applies a JSON merge patch (RFC 7396) to the config in effect, as
// JSON with the file's key names (config.Map), and applies the result as a
// reload would: validated, restart-only changes refused whole, counted. The
// patch is decoded JSON (objects as map[string]any, numbers as
// json.Number) and belongs to Patch once passed. The environment
// overrides are already part of the config in effect and are not applied
// again, so a patch may change a key the environment set; the file's next
// edit brings them back with the file.
func (r *reloader) Patch(patch map[string]any) admin.Reload {
	r.mu.Lock()
	defer r.mu.Unlock()
	base, err := r.cur.Load().Map()
	if err != nil {
		return r.reject(nil, fmt.Errorf("config patch: %w", err))
	}
	var doc bytes.Buffer
	enc := json.NewEncoder(&doc)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(keepFloats(mergepatch.Apply(base, patch))); err != nil {
		return r.reject(nil, fmt.Errorf("config patch: %w", err))
	}
	next, err := config.Parse(doc.Bytes(), nil)
	if err != nil {
		return r.reject(nil, fmt.Errorf("config patch: %w", err))
	}
	out := r.switchTo(next, "config patch")
	if out.Result == "applied" {
		r.patched = true
		r.log.Info("config patched; the file's next edit replaces the patch", "path", r.path, "generation", out.Generation)
	}
	out.Patched = r.patched
	return out
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

// keepFloats replaces the integral floats of the config in effect in v
// with their text and a decimal point, as config.YAML writes them: JSON
// would write 1.0 as 1, which Parse reads back as an integer, and a
// free-form value such as a model's chat_template_kwargs would change. It
// replaces in place, so v's maps and lists must be the caller's own; the
// patch's numbers are json.Number and keep their text.
func keepFloats(v any) any {
	switch x := v.(type) {
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return json.Number(s)
	case map[string]any:
		for k, e := range x {
			x[k] = keepFloats(e)
		}
	case []any:
		for i, e := range x {
			x[i] = keepFloats(e)
		}
	}
	return v
}

// apply parses doc, the file's bytes, and applies it. Once the file's
// config is in effect (applied or unchanged), no patch is. Under mu.
func (r *reloader) apply(doc []byte) admin.Reload {
	next, err := config.Parse(doc, r.env)
	if err != nil {
		return r.reject(nil, fmt.Errorf("config %s: %w", r.path, err))
	}
	out := r.switchTo(next, "config "+r.path)
	if out.Result != "rejected" {
		r.patched = false
	}
	out.Patched = r.patched
	return out
}

// switchTo makes next the config in effect unless it needs a restart; what
// names the source in errors. Under mu.
func (r *reloader) switchTo(next *config.Config, what string) admin.Reload {
	prev := r.cur.Load()
	changed := config.Diff(prev, next)
	if len(changed) == 0 {
		r.unchanged.Inc()
		return admin.Reload{Result: "unchanged", Generation: r.gen.Load()}
	}
	if ro := config.RestartOnly(prev, next); len(ro) > 0 {
		return r.reject(changed, fmt.Errorf("%s: needs a restart, refused whole: %s", what, strings.Join(ro, ", ")))
	}
	if err := r.fl.Reconfigure(next); err != nil {
		return r.reject(changed, err)
	}
	r.fe.SetConfig(next)
	if r.auth != nil {
		r.auth.Apply(next)
	}
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
	r.log.Info("config reloaded", "from", what, "generation", gen, "changed", changed)
	logWarnings(r.log, next)
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
