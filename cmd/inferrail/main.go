// Command inferrail is Inferrail's one binary: the KV-cache-aware gateway, the
// vLLM simulator and the tools around them, as subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the gateway from a config file", runServe},
		{"epp", "run as the endpoint picker behind Envoy (ext_proc, Gateway API Inference Extension)", runEPP},
		{"launch", "run a gateway in front of simulated engines, to try Inferrail", runLaunch},
		{"check", "validate a config file and exit", runCheck},
		{"sim", "run a simulated vLLM engine", runSim},
		{"tokenize", "print a request's rendered prompt, token ids and block hashes", runTokenize},
		{"calibrate", "fit cost_model's prefill parameters to an idle engine", runCalibrate},
		{"bench", "benchmark policies: open-loop runs, comparisons, sweeps in real and virtual time, reports", runBench},
		{"whatif", "how many GPUs each routing policy needs for a trace or workload, in virtual time", runWhatif},
		{"replay-shadow", "replay an observability.shadow_log and check every shadow pick", runReplayShadow},
		{"stress", "run the stress and fault suite against in-process gateways and simulators", runStress},
		{"version", "print the version", func(_ context.Context, _ []string, out, _ io.Writer) error {
			fmt.Fprintln(out, "inferrail", version)
			return nil
		}},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Inferrail: a KV-cache-aware router for vLLM and SGLang fleets.\n\nUsage: inferrail <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'inferrail <command> --help' for a command's flags.\n")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "inferrail %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "inferrail: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage is returned after a flag error that the flag package has already printed.
var errUsage = errors.New("usage")

func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, synopsis string) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}
