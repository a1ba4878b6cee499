package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/bench/message"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// benchMessages runs bench/message: claude-code sessions over /v1/messages
// routed by cost_model, round_robin and cost_model hashing the billing
// header, in virtual time and, with --real, in real time on in-process
// fleets.
func benchMessages(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench messages", flag.ContinueOnError)
	rate := fs.Float64("rate", 4, "mean requests per second")
	replicas := fs.Int("replicas", 3, "engines")
	duration := fs.Duration("duration", 180*time.Second, "virtual time of arrivals per run")
	warmUp := fs.Duration("warmup", 30*time.Second, "arrivals before this are left out")
	seeds := fs.Int("seeds", 3, "seeds per virtual row (1, 2, …)")
	events := fs.String("events", "off,on", "the engines' KV events in virtual time: off, on or off,on")
	realTime := fs.Bool("real", false, "also run each router once in real time: a gateway and the simulators in this process")
	realFor := fs.Duration("real-duration", 30*time.Second, "real time of arrivals per real-time run")
	realWarm := fs.Duration("real-warmup", 8*time.Second, "real-time arrivals before this are left out")
	realEvents := fs.String("real-events", "on", "the engines' KV events in real time: off, on or off,on")
	affinity := fs.Bool("session-affinity", false, "turn on cost_model's session affinity (routing.session_affinity; the session is metadata.user_id)")
	out := fs.String("out", "", "Markdown file to write (default: stdout)")
	wf := workloadFlags{kind: workload.KindClaudeCode}
	wf.register(fs)
	if err := parseFlags(fs, args, stderr, "inferrail bench messages [--real] [flags]"); err != nil {
		return err
	}
	wl, err := wf.workload()
	if err != nil {
		return err
	}
	o := message.Options{Workload: wl, Rate: *rate, Replicas: *replicas, Engine: sim.DefaultOptions().Engine,
		Duration: *duration, WarmUp: *warmUp, SessionAffinity: *affinity}
	for k := range max(*seeds, 1) {
		o.Seeds = append(o.Seeds, uint64(k+1))
	}
	if o.Events, err = onOff("--events", *events); err != nil {
		return err
	}
	rows, err := message.Virtual(o)
	if err != nil {
		return err
	}
	if *realTime {
		o.Duration, o.WarmUp = *realFor, *realWarm
		if o.Events, err = onOff("--real-events", *realEvents); err != nil {
			return err
		}
		rr, err := message.Real(ctx, o, func(ctx context.Context, v message.Variant, events bool) (harness.Target, func(), error) {
			return startFleet(ctx, fleetSpec{Replicas: o.Replicas, Engine: o.Engine, KVEvents: events, Policy: v.Policy,
				SessionAffinity: o.SessionAffinity, Tweaks: benchTweaks{keepBillingHeader: v.KeepBillingHeader}})
		})
		if err != nil {
			return err
		}
		rows = append(rows, rr...)
	}
	w, closeOut, err := output(*out, stdout)
	if err != nil {
		return err
	}
	defer closeOut()
	return message.Write(w, rows)
}

// onOff reads a comma-separated list of off and on.
func onOff(flag, s string) ([]bool, error) {
	var out []bool
	for _, v := range strings.Split(s, ",") {
		switch strings.TrimSpace(v) {
		case "off":
			out = append(out, false)
		case "on":
			out = append(out, true)
		default:
			return nil, fmt.Errorf("%s: %q: want off, on or off,on", flag, v)
		}
	}
	return out, nil
}
