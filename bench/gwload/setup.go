package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// The targets, in the order the report lists them. Every target but direct
// is a proxy in front of the same simulators.
const (
	direct      = "direct"
	nginx       = "nginx"
	fastproxy   = "fastproxy"
	gateway     = "gateway"            // least_request, no tokenizer
	gatewayCost = "gateway-cost_model" // cost_model with the simulators' tokenizer
)

var targetNames = []string{direct, nginx, fastproxy, gateway, gatewayCost}

// fastproxyReady is the line bench/fastproxy prints once it serves.
var fastproxyReady = regexp.MustCompile(`^fastproxy: serving on (http://\S+)$`)

// gatewaySpec is one `inferrail serve` under test: its policy and tokenizer.
type gatewaySpec struct {
	Target    string
	Policy    string
	Tokenizer string // "" for none
}

var gatewaySpecs = []gatewaySpec{
	{Target: gateway, Policy: policy.LeastRequest{}.Name()},
	{Target: gatewayCost, Policy: (*policy.CostModel)(nil).Name(), Tokenizer: tokenize.Sim},
}

// target is one way to reach the simulators.
type target struct {
	Name string
	// URLs are the base URLs requests go to, round robin: the simulators
	// themselves for direct, else the one proxy.
	URLs []string
	// Proc is the proxy process whose CPU time the report gives; nil for direct.
	Proc *loadgen.Proc
}

// setup is every process a benchmark runs against. Its fields are owned by
// the goroutine that called startSetup.
type setup struct {
	dir     string // temp dir: nginx's files, the gateways' configs, wrk's script
	sims    []*loadgen.Proc
	proxies []*loadgen.Proc // nginx, fastproxy, the gateways
	targets []target

	NginxConf    string            // the generated files, for the report
	GatewayConfs map[string]string // target → config
}

// target returns the target called name, or nil.
func (s *setup) target(name string) *target {
	for i := range s.targets {
		if s.targets[i].Name == name {
			return &s.targets[i]
		}
	}
	return nil
}

// startSetup starts the simulators, then nginx, fastproxy and the gateways
// in front of them. On error it stops whatever it had started.
func startSetup(ctx context.Context, c *config, stderr io.Writer) (s *setup, err error) {
	s = &setup{}
	defer func() {
		if err != nil {
			s.stop()
			s = nil
		}
	}()
	if s.dir, err = os.MkdirTemp("", "gwload-"); err != nil {
		return s, err
	}
	s.GatewayConfs = map[string]string{}
	toSims := target{Name: direct}
	var hostports []string
	for i := range c.sims {
		p, err := loadgen.StartSim(ctx, c.bin, "--zero-latency", "--served-model-name", c.model)
		if err != nil {
			return s, fmt.Errorf("simulator %d: %w", i, err)
		}
		p.Name = fmt.Sprintf("sim-%d", i)
		s.sims = append(s.sims, p)
		toSims.URLs = append(toSims.URLs, p.URL)
		u, err := url.Parse(p.URL)
		if err != nil {
			return s, fmt.Errorf("simulator %d: %w", i, err)
		}
		hostports = append(hostports, u.Host)
		fmt.Fprintf(stderr, "gwload: %s pid %d on %s\n", p.Name, p.Pid, p.URL)
	}

	// nginx, configured and exec'd by the project's script.
	nginxAddr, err := freeAddr()
	if err != nil {
		return s, err
	}
	ndir := filepath.Join(s.dir, "nginx")
	if err := os.Mkdir(ndir, 0o755); err != nil {
		return s, err
	}
	ng, err := loadgen.Start(ctx, loadgen.Command{Name: nginx, Bin: c.nginxScript,
		Args: append([]string{ndir, nginxAddr}, hostports...), Env: []string{"NGINX=" + c.nginx}})
	if err != nil {
		return s, err
	}
	s.proxies = append(s.proxies, ng)
	if err := loadgen.WaitHealthy(ctx, ng, "http://"+nginxAddr+"/health", 10*time.Second); err != nil {
		return s, fmt.Errorf("nginx: %w (error log: %s)", err, readFile(filepath.Join(ndir, "error.log")))
	}
	s.NginxConf = readFile(filepath.Join(ndir, "nginx.conf"))
	fmt.Fprintf(stderr, "gwload: nginx pid %d on http://%s\n", ng.Pid, nginxAddr)
	s.targets = []target{toSims, {Name: nginx, URLs: []string{"http://" + nginxAddr}, Proc: ng}}

	// The floor for a Go proxy: bench/fastproxy, built by the script.
	fp, err := loadgen.Start(ctx, loadgen.Command{Name: fastproxy, Bin: c.fastproxy, Args: hostports, Ready: fastproxyReady})
	if err != nil {
		return s, err
	}
	s.proxies = append(s.proxies, fp)
	if err := loadgen.WaitHealthy(ctx, fp, fp.URL+"/health", 10*time.Second); err != nil {
		return s, fmt.Errorf("fastproxy: %w", err)
	}
	fmt.Fprintf(stderr, "gwload: fastproxy pid %d on %s\n", fp.Pid, fp.URL)
	s.targets = append(s.targets, target{Name: fastproxy, URLs: []string{fp.URL}, Proc: fp})

	// The gateways.
	for _, g := range gatewaySpecs {
		gwAddr, err := freeAddr()
		if err != nil {
			return s, err
		}
		conf := gatewayConfig(gwAddr, c.model, toSims.URLs, g)
		s.GatewayConfs[g.Target] = conf
		cfgPath := filepath.Join(s.dir, g.Target+".yaml")
		if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
			return s, err
		}
		p, err := loadgen.Start(ctx, loadgen.Command{Name: g.Target, Bin: c.bin,
			Args: []string{"serve", "--config", cfgPath}, Env: c.gatewayEnv})
		if err != nil {
			return s, err
		}
		s.proxies = append(s.proxies, p)
		if err := loadgen.WaitHealthy(ctx, p, "http://"+gwAddr+"/health", 10*time.Second); err != nil {
			return s, fmt.Errorf("%s: %w", g.Target, err)
		}
		fmt.Fprintf(stderr, "gwload: %s pid %d on http://%s\n", g.Target, p.Pid, gwAddr)
		s.targets = append(s.targets, target{Name: g.Target, URLs: []string{"http://" + gwAddr}, Proc: p})
	}
	return s, nil
}

// gatewayConfig is a gateway's config file: the simulators as replicas,
// g's policy and tokenizer, every other key at its default.
func gatewayConfig(listen, model string, simURLs []string, g gatewaySpec) string {
	var b strings.Builder
	b.WriteString("# Generated by bench/gwload: a gateway under test, in front of the\n")
	b.WriteString("# same simulators that the other targets use.\n")
	fmt.Fprintf(&b, "server:\n  listen: %s\n  admin_listen: 127.0.0.1:0\n", listen)
	fmt.Fprintf(&b, "models:\n  - name: %s\n", model)
	if g.Tokenizer != "" {
		fmt.Fprintf(&b, "    tokenizer: %s\n", g.Tokenizer)
	}
	b.WriteString("replicas:\n")
	for i, u := range simURLs {
		fmt.Fprintf(&b, "  - id: sim-%d\n    url: %s\n    models: [%s]\n", i, u, model)
	}
	fmt.Fprintf(&b, "routing:\n  default_policy: %s\n", g.Policy)
	return b.String()
}

// stop stops every process, the proxies first, and removes the temp dir. It reports a process that had died before it was stopped, since
// then the numbers are not to be trusted.
func (s *setup) stop() error {
	var errs []error
	for _, p := range slices.Backward(s.proxies) {
		errs = append(errs, p.Stop())
	}
	for _, p := range s.sims {
		errs = append(errs, p.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// freeAddr is a loopback address with a port that was free a moment ago.
// nginx cannot listen on port 0 and tell, so the port is picked here.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}
