package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/inferrail/inferrail/model/shadow"
)

// maxShadowLine bounds one line of the shadow log: a decision with long
// prompts over many candidates.
const maxShadowLine = 64 << 20

// replayShown is how many problems replay-shadow describes.
const replayShown = 5

// errReplay is replay-shadow's error for a log that does not check out,
// after it printed why.
var errReplay = errors.New("the shadow log does not replay")

// runReplayShadow rebuilds the shadow policies of an
// observability.shadow_log from its config lines, replays every decision
// through them in order and checks each pick and price against the log.
func runReplayShadow(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail replay-shadow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: inferrail replay-shadow LOG\n\nReplays an observability.shadow_log and checks every shadow pick; exits 1 on any mismatch or malformed line.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	return replayShadow(f, stdout)
}

// replayShadow replays the log read from r and prints what it found to
// out; it fails when any line is malformed, cannot be replayed or
// mismatches.
func replayShadow(r io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxShadowLine)
	var (
		rp               shadow.Replay
		lines, configs   int
		bad, badMismatch int
		problems         []string
	)
	note := func(s string) {
		if len(problems) < replayShown {
			problems = append(problems, s)
		}
	}
	for sc.Scan() {
		lines++
		l, err := shadow.ParseLine(sc.Bytes())
		if err != nil {
			bad++
			note(fmt.Sprintf("line %d: malformed: %v", lines, err))
			continue
		}
		if l.Kind == shadow.KindConfig {
			configs++
		}
		mis, err := rp.Add(l)
		if err != nil {
			bad++
			note(fmt.Sprintf("line %d: %v", lines, err))
			continue
		}
		if len(mis) > 0 {
			badMismatch++
		}
		for _, m := range mis {
			note(fmt.Sprintf("line %d: mismatch: %s", lines, m))
		}
	}
	if err := sc.Err(); err != nil {
		bad++
		note(fmt.Sprintf("line %d: %v", lines+1, err))
	}
	fmt.Fprintf(out, "%d lines: %d config, %d decisions replayed, %d picks checked, %d mismatched (on %d lines), %d lines malformed or not replayable\n",
		lines, configs, rp.Decisions, rp.Checked, rp.Mismatched, badMismatch, bad)
	for _, p := range problems {
		fmt.Fprintln(out, "  "+p)
	}
	if rp.Mismatched > 0 || bad > 0 {
		return errReplay
	}
	return nil
}
