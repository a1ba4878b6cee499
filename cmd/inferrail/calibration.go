package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/inferrail/inferrail/bench/calib"
	"github.com/inferrail/inferrail/sim"
)

// benchCalibration runs bench/calib: cost_model's online calibration in
// the fleet simulator, against engines 2× and 0.5× as slow as configured
// and a pool of both, and one that changes speed mid-run.
func benchCalibration(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench calibration", flag.ContinueOnError)
	seeds := fs.Int("seeds", 3, "seeds per cell (1, 2, …)")
	requests := fs.Int("requests", 3300, "requests per run (three replicas)")
	jobs := fs.Int("jobs", 2, "runs at once")
	decodeStep := fs.Duration("decode-token", 0, "the engines' --decode-token-ms (0: the simulator's default, 20ms)")
	speedAt := fs.Duration("speed-at", 600*time.Second, "when replica 0 changes speed")
	speedFactor := fs.Float64("speed-factor", 2, "how much slower replica 0 becomes")
	speedRequests := fs.Int("speed-requests", 4000, "requests per speed-change run")
	out := fs.String("out", "", "Markdown file to write (default: stdout)")
	if err := parseFlags(fs, args, stderr, "inferrail bench calibration [flags]"); err != nil {
		return err
	}
	o := calib.Options{Points: calib.Points(), Pools: calib.Pools(), Engine: sim.DefaultOptions().Engine,
		Requests: *requests, Jobs: *jobs}
	if *decodeStep > 0 {
		o.Engine.Latency.DecodeToken = *decodeStep
	}
	for k := range max(*seeds, 1) {
		o.Seeds = append(o.Seeds, uint64(k+1))
	}
	conv, err := calib.Convergence(o)
	if err != nil {
		return err
	}
	ttft, err := calib.TTFT(o)
	if err != nil {
		return err
	}
	so := o
	so.Requests = *speedRequests
	speed, err := calib.SpeedChange(so, *speedFactor, *speedAt)
	if err != nil {
		return err
	}
	return writeOut(*out, stdout, func(w io.Writer) error {
		fmt.Fprintf(w, "Engines: decode step %v. Fit error after N requests on a replica:\n\n", o.Engine.Latency.DecodeToken)
		calib.WriteErrors(w, conv)
		fmt.Fprintln(w, "\ncost_model's p99 TTFT:")
		fmt.Fprintln(w)
		calib.WriteTTFT(w, ttft)
		fmt.Fprintln(w, "\nSpeed change:")
		fmt.Fprintln(w)
		calib.WriteSpeed(w, speed)
		return nil
	})
}
