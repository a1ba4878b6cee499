package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/transport/discovery"
	"github.com/inferrail/inferrail/transport/kubernetes"
)

// firstSyncTimeout bounds how long startup waits for the Kubernetes pool's
// first endpoints, so that the first requests find them; past it the
// gateway starts with what it has, and they join when listed.
const firstSyncTimeout = 5 * time.Second

// settleTimeout bounds how long startup waits for the fleet to apply the
// endpoints a source found at start (Fleet.Settle).
const settleTimeout = 5 * time.Second

// The discovery sources' names, as metrics, logs and /admin/replicas show
// them.
const (
	sourceKubernetes = "kubernetes"
	sourceFile       = "file"
)

// poolFlags are llm-d's endpoint picker flags for the pool, shared by every
// command that runs a gateway. Each one given sets its
// discovery.kubernetes key over the file, as an INFERRAIL_ entry would.
type poolFlags struct {
	name, namespace, selector, ports string
}

// addPoolFlags defines the pool flags on fs.
func addPoolFlags(fs *flag.FlagSet) *poolFlags {
	p := &poolFlags{}
	fs.StringVar(&p.name, "pool-name", "", "the InferencePool to follow (sets discovery.kubernetes.pool_name)")
	fs.StringVar(&p.namespace, "pool-namespace", "", "the namespace of the pool and its pods; default: the gateway pod's own, else default (sets discovery.kubernetes.pool_namespace)")
	fs.StringVar(&p.selector, "endpoint-selector", "", "without the InferencePool CRD: the pods' labels, key=value pairs separated by commas, "+
		"such as app=vllm,env=prod (sets discovery.kubernetes.endpoint_selector)")
	fs.StringVar(&p.ports, "endpoint-target-ports", "", "with --endpoint-selector: the pods' ports, 1 to 8 numbers separated by commas, "+
		"such as 8000,8001 (sets discovery.kubernetes.target_ports)")
	return p
}

// env returns the INFERRAIL_ entries that set the keys of the flags given.
func (p *poolFlags) env() ([]string, error) {
	const prefix = config.EnvPrefix + "DISCOVERY__KUBERNETES__"
	var out []string
	if p.name != "" {
		out = append(out, prefix+"POOL_NAME="+p.name)
	}
	if p.namespace != "" {
		out = append(out, prefix+"POOL_NAMESPACE="+p.namespace)
	}
	if p.selector != "" {
		sel, err := parseSelector(p.selector)
		if err != nil {
			return nil, fmt.Errorf("--endpoint-selector: %w", err)
		}
		b, _ := json.Marshal(sel) // JSON is YAML, as the entry is read
		out = append(out, prefix+"ENDPOINT_SELECTOR="+string(b))
	}
	if p.ports != "" {
		ports, err := parsePorts(p.ports)
		if err != nil {
			return nil, fmt.Errorf("--endpoint-target-ports: %w", err)
		}
		b, _ := json.Marshal(ports)
		out = append(out, prefix+"TARGET_PORTS="+string(b))
	}
	return out, nil
}

// environ returns the process environment with the flags' entries after
// it, or errUsage once it has told stderr which flag is malformed.
func (p *poolFlags) environ(stderr io.Writer) ([]string, error) {
	flagEnv, err := p.env()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, errUsage
	}
	return append(os.Environ(), flagEnv...), nil
}

// parseSelector reads key=value pairs separated by commas, as llm-d's
// --endpoint-selector.
func parseSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q is not key=value", pair)
		}
		k = strings.TrimSpace(k)
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%q is given twice", k)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// parsePorts reads port numbers separated by commas; config checks their
// range and count.
func parsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a port number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// discoveries are the running discovery sources; stop ends them and joins
// their goroutines.
type discoveries struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (d *discoveries) stop() {
	d.cancel()
	d.wg.Wait()
}

// startDiscovery starts the discovery sources cfg configures, reporting
// to fl: the endpoint file (read once now, then watched) and Kubernetes
// (waited for up to firstSyncTimeout). Each waits until the fleet holds
// what it found, so the first requests can go there. A source that cannot
// start says so through its reporter, and the gateway runs on what else
// it has.
func startDiscovery(cfg *config.Config, fl *fleet.Fleet, log *slog.Logger, set *metrics.Set) *discoveries {
	ctx, cancel := context.WithCancel(context.Background())
	d := &discoveries{cancel: cancel}
	if f := cfg.Discovery.File; f.Path != "" {
		rep := discovery.NewReporter(sourceFile, fl, log, set)
		src := discovery.NewFile(f.Path, discovery.Template{Scheme: f.Scheme, Models: discoveredModels(cfg, f.Models),
			MaxConcurrency: f.MaxConcurrency, MaxPending: f.MaxPending, KVCapacityBlocks: f.KVCapacityBlocks,
			KVEventsPort: f.KVEventsPort, KVEventsReplayPort: f.KVEventsReplayPort, Engine: kvevent.Engine(f.EngineType)}, rep)
		src.Load()
		if err := fl.Settle(settleTimeout); err != nil {
			log.Warn("discovery: the endpoint file's replicas are not in the fleet yet; starting without waiting", "err", err)
		}
		if f.Watch {
			d.wg.Go(func() { src.Run(ctx, 0) })
		}
		log.Info("discovery: endpoint file", "path", f.Path, "watch", f.Watch)
	}
	if k := cfg.Discovery.Kubernetes; k.On() {
		rep := discovery.NewReporter(sourceKubernetes, fl, log, set)
		w, err := newPoolWatcher(&k, cfg, rep, log)
		if err != nil {
			rep.Fail("no Kubernetes client: give discovery.kubernetes.kubeconfig, or run in a pod with a service account", err)
			return d
		}
		d.wg.Go(func() { w.Run(ctx) })
		select {
		case <-w.Synced():
			if err := fl.Settle(settleTimeout); err != nil {
				log.Warn("discovery: the Kubernetes pool's replicas are not in the fleet yet; starting without waiting", "err", err)
			}
		case <-time.After(firstSyncTimeout):
			log.Warn("discovery: the Kubernetes pool's endpoints are not listed yet; starting without them", "waited", firstSyncTimeout)
		}
	}
	return d
}

// newPoolWatcher returns the watcher discovery.kubernetes configures.
func newPoolWatcher(k *config.Kubernetes, cfg *config.Config, rep *discovery.Reporter, log *slog.Logger) (*kubernetes.Watcher, error) {
	rc, err := kubernetes.RESTConfig(k.Kubeconfig, os.Getenv("KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	cs, dyn, err := kubernetes.Clients(rc)
	if err != nil {
		return nil, err
	}
	pool := kubernetes.Pool{Name: k.PoolName, Namespace: kubernetes.Namespace(k.PoolNamespace, os.ReadFile), Selector: k.EndpointSelector}
	for _, p := range k.TargetPorts {
		pool.TargetPorts = append(pool.TargetPorts, int32(p))
	}
	log.Info("discovery: kubernetes", "pool", pool.Name, "namespace", pool.Namespace, "selector", pool.Selector,
		"target_ports", pool.TargetPorts, "api", rc.Host)
	return kubernetes.New(cs, dyn, kubernetes.Options{Pool: pool, Reporter: rep, Logger: log,
		Template: discovery.Template{Scheme: k.Scheme, Models: discoveredModels(cfg, k.Models),
			MaxConcurrency: k.MaxConcurrency, MaxPending: k.MaxPending, KVCapacityBlocks: k.KVCapacityBlocks,
			KVEventsPort: k.KVEventsPort, KVEventsReplayPort: k.KVEventsReplayPort, Engine: kvevent.Engine(k.EngineType)}}), nil
}

// discoveredModels returns the models a discovery source's replicas
// serve: those listed, or every configured model when none is.
func discoveredModels(cfg *config.Config, listed []string) []string {
	if len(listed) > 0 {
		return listed
	}
	out := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		out[i] = m.Name
	}
	return out
}
