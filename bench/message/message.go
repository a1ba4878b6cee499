// Package message measures routing on Anthropic Messages traffic: Claude
// Code's agent sessions (sim/workload's claude-code), routed by cost_model,
// by round_robin, and by cost_model hashing the prompt with Claude Code's
// billing header kept, as a router that hashes the text as it came does,
// to show what dropping the header (as vLLM does) is worth. It runs them
// in virtual time (sim/cluster) and in real time through fleets its caller
// starts (a gateway in front of simulators, over /v1/messages), and
// writes both as one Markdown table.
//
// message starts no goroutines of its own, does no I/O but the runs and
// writing the table the caller asks for, and keeps no globals.
package message

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
)

// Variant is a router as the benchmark runs it.
type Variant struct {
	// Name labels its rows; Policy is the policy's config name.
	Name, Policy string
	// KeepBillingHeader hashes the prompt with the billing header kept
	// (cluster.Config.KeepBillingHeader, prompt.Preparer.KeepBillingHeader).
	KeepBillingHeader bool
	// Affine marks the variants whose policy reads
	// routing.session_affinity, renamed when Options.SessionAffinity is on.
	Affine bool
}

// Variants are the three routers compared: cost_model, round_robin and
// cost_model on the raw text.
func Variants() []Variant {
	return []Variant{
		{Name: "cost_model", Policy: "cost_model", Affine: true},
		{Name: "round_robin", Policy: "round_robin"},
		{Name: "cost_model, billing header hashed", Policy: "cost_model", KeepBillingHeader: true, Affine: true},
	}
}

// Options describe the runs: every variant with the engines' KV events
// off and on (Events), each on every seed.
type Options struct {
	Workload workload.Workload
	Rate     float64
	Replicas int
	Engine   engine.Config
	Events   []bool
	// Requests due from zero to Duration are sent; those due before WarmUp
	// are left out.
	Duration, WarmUp time.Duration
	Seeds            []uint64
	// SessionAffinity turns on cost_model's session affinity
	// (routing.session_affinity) in every cost_model variant, whose names
	// then say "+session_affinity": the session is the body's
	// metadata.user_id.
	SessionAffinity bool
}

// name is v's label under o.
func (o *Options) name(v Variant) string {
	if o.SessionAffinity && v.Affine {
		return strings.Replace(v.Name, "cost_model", "cost_model+session_affinity", 1)
	}
	return v.Name
}

// Row is one variant in one mode, over its seeds.
type Row struct {
	Mode, Variant string
	Events        bool
	// Requests counts the measured requests, Errors the failed ones.
	Requests, Errors int
	// HitRate is the engines' reported cached tokens over the prompt
	// tokens of the successful requests.
	HitRate          float64
	P50TTFT, P99TTFT time.Duration
	// Predicted counts the requests the gateway predicted, Exact the
	// share of those it predicted exactly.
	Predicted int
	Exact     float64
}

// Modes of the rows.
const (
	ModeVirtual = "virtual time"
	ModeReal    = "real time"
)

func row(mode, name string, events bool, s *harness.Summary) Row {
	r := Row{Mode: mode, Variant: name, Events: events, Requests: s.Requests, Errors: s.Errors,
		HitRate: s.HitRate, P50TTFT: seconds(s.TTFT.P50), P99TTFT: seconds(s.TTFT.P99)}
	if p := s.Prediction; p != nil {
		r.Predicted, r.Exact = p.Requests, p.Exact
	}
	return r
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Virtual runs every variant in virtual time, the seeds' requests summed
// into one row.
func Virtual(o Options) ([]Row, error) {
	var rows []Row
	for _, events := range o.Events {
		for _, v := range Variants() {
			all := &harness.Run{WarmUp: o.WarmUp, Duration: o.Duration, Oracle: true}
			cm := policy.DefaultCostModelParams()
			cm.SessionAffinity = o.SessionAffinity
			for _, seed := range o.Seeds {
				res, err := cluster.Run(cluster.Config{Replicas: o.Replicas, Engine: o.Engine, Policy: v.Policy, CostModel: &cm,
					KVEvents: events, KeepBillingHeader: v.KeepBillingHeader,
					Workload: o.Workload, Rate: o.Rate, Duration: o.Duration, WarmUp: o.WarmUp, Seed: seed})
				if err != nil {
					return nil, err
				}
				run := harness.Virtual(&res, o.WarmUp, o.Duration)
				all.Records = append(all.Records, run.Records...)
			}
			s := all.Summarize(harness.DefaultSLO())
			rows = append(rows, row(ModeVirtual, o.name(v), events, &s))
		}
	}
	return rows, nil
}

// Fleet starts a cold fleet routed by v, with the engines' KV events when
// events is set (and cost_model's session affinity when
// Options.SessionAffinity), and returns its target and how to stop it.
type Fleet func(ctx context.Context, v Variant, events bool) (harness.Target, func(), error)

// Real runs every variant in real time, each on a cold fleet of start's,
// on the first seed.
func Real(ctx context.Context, o Options, start Fleet) ([]Row, error) {
	if len(o.Seeds) == 0 {
		return nil, errors.New("message: no seed")
	}
	var rows []Row
	for _, events := range o.Events {
		for _, v := range Variants() {
			t, stop, err := start(ctx, v, events)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
			run, err := harness.Measure(ctx, t, harness.Options{Workload: o.Workload, Rate: o.Rate,
				Duration: o.Duration, WarmUp: o.WarmUp, Seed: o.Seeds[0]})
			stop()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
			s := run.Summarize(harness.DefaultSLO())
			rows = append(rows, row(ModeReal, o.name(v), events, &s))
		}
	}
	return rows, nil
}

// Write writes rows as a Markdown table.
func Write(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, "| mode | router | KV events | requests | errors | hit rate | p50 TTFT | p99 TTFT | exact predictions |\n|---|---|---|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rows {
		ev, exact := "off", "–"
		if r.Events {
			ev = "on"
		}
		if r.Predicted > 0 {
			exact = fmt.Sprintf("%.3f (%d)", r.Exact, r.Predicted)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.3f | %v | %v | %s |\n",
			r.Mode, r.Variant, ev, r.Requests, r.Errors, r.HitRate,
			r.P50TTFT.Round(time.Millisecond), r.P99TTFT.Round(time.Millisecond), exact); err != nil {
			return err
		}
	}
	return nil
}
