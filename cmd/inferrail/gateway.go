package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/admin"
	"github.com/inferrail/inferrail/transport/certs"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/health"
	"github.com/inferrail/inferrail/transport/jsonl"
	"github.com/inferrail/inferrail/transport/kvevents"
	"github.com/inferrail/inferrail/transport/requestlog"
	"github.com/inferrail/inferrail/transport/scrape"
	"github.com/inferrail/inferrail/transport/telemetry"
	"github.com/inferrail/inferrail/transport/tokenize"
	"github.com/inferrail/inferrail/transport/tracing"
)

// traceFlushTimeout bounds exporting the last spans when serve returns.
const traceFlushTimeout = 5 * time.Second

// shadowLogQueue is how many shadow log lines may wait for the disk; when
// they fill it, the shadows fall behind and drop decisions
// (inferrail_shadow_dropped_total), which the replay never misses.
const shadowLogQueue = 4096

var _ fleet.TrialLog = (*jsonl.Writer)(nil)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail check", flag.ContinueOnError)
	path := fs.String("config", "", "config file to validate (required)")
	engine := fs.String("url", "", "an engine's base URL: send it a few prompts and fail unless each tokenizer counts them as its usage.prompt_tokens does")
	var engineEvents stringList
	fs.Var(&engineEvents, "kv-events-config", "the engines' --kv-events-config JSON, or ID=JSON for one replica or DNS group "+
		"(repeatable): warn about each KV event stream whose two ends cannot meet")
	pool := addPoolFlags(fs)
	if err := parseFlags(fs, args, stderr, "inferrail check --config FILE [--url ENGINE] [--kv-events-config [ID=]JSON]... [pool flags as serve's]"); err != nil {
		return err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "--config is required")
		return errUsage
	}
	env, err := pool.environ(stderr)
	if err != nil {
		return err
	}
	cfg, err := config.Load(*path, env)
	if err != nil {
		return err
	}
	// The key, token and certificate files load as serve would load them.
	if _, err := newSecurity(cfg, nil, metrics.NewSet()); err != nil {
		return err
	}
	// As does the request log's file.
	if p := cfg.Observability.RequestLog.Path; p != "" {
		if err := requestlog.CheckPath(p); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s: ok\n", *path)
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	for i := range cfg.Models {
		m := &cfg.Models[i]
		if cm := cfg.RoutingFor(m).CostModel; cm.Auto {
			fmt.Fprintf(stdout, "  model %s: cost_model auto: each replica fits its prefill online, starting from a=%g b=%g d=%g\n",
				m.Name, cm.PrefillTokenSecs, cm.PrefillPairSecs, cm.PrefillFixedSecs)
		}
	}
	// A tokenizer that fails to load does not fail the config: its model
	// routes without cache predictions. Say so.
	models, statuses := tokenize.LoadAll(cfg, hubCache())
	for _, st := range statuses {
		fmt.Fprintf(stdout, "  %s\n", st)
	}
	if err := checkEvents(cfg, engineEvents, statuses, stdout); err != nil {
		return err
	}
	if *engine == "" {
		return nil
	}
	return checkEngine(ctx, cfg, models, *engine, stdout)
}

// openRequestLog opens observability.request_log for the front end or the
// endpoint picker, its counters in met; nil when it is off.
func openRequestLog(cfg *config.Config, log *slog.Logger, met *telemetry.Registry) (*requestlog.Writer, error) {
	rc := cfg.Observability.RequestLog
	if rc.Path == "" {
		return nil, nil
	}
	set := metrics.NewSet()
	w, err := requestlog.Open(requestlog.Options{Path: rc.Path, SampleRate: rc.SampleRate, BlockSize: rc.BlockSize,
		MaxBytes: rc.MaxBytes, MaxFiles: rc.MaxFiles, Log: log}, set)
	if err != nil {
		return nil, err
	}
	met.Include(set)
	log.Info("request log", "path", rc.Path, "sample_rate", rc.SampleRate, "block_size", rc.BlockSize,
		"max_bytes", rc.MaxBytes, "max_files", rc.MaxFiles)
	return w, nil
}

// hubCache is the local Hugging Face hub cache tokenizers are looked up in.
func hubCache() string {
	home, _ := os.UserHomeDir()
	return tokenize.HubCache(os.Getenv, home)
}

// edgeTokenizer is the frontend's Tokenizer over the tokenizer pool.
type edgeTokenizer struct{ p *tokenize.Pool }

var (
	_ frontend.TokenIDs    = edgeTokenizer{}
	_ frontend.Detokenizer = edgeTokenizer{}
	_ frontend.Renderer    = edgeTokenizer{}
)

func (e edgeTokenizer) Prepare(model string, chat bool, body []byte, _ time.Time) (frontend.Prompt, bool) {
	kind := tokenize.Completion
	if chat {
		kind = tokenize.Chat
	}
	return e.prepare(model, kind, body)
}

// TokenIDs gives the ids of a /tokenize body (frontend.TokenIDs), for a
// model with a tokenizer of its own: a prompt of token ids needs none, but
// /tokenize takes only text.
func (e edgeTokenizer) TokenIDs(model string, body []byte) ([]uint32, bool) {
	if e.p.Model(model) == nil {
		return nil, false
	}
	pr, r := e.p.Prepare(context.Background(), model, tokenize.Tokenize, body)
	return pr.IDs, r == tokenize.OK
}

// Detokenize decodes ids for /detokenize (frontend.Detokenizer), for a
// model with a tokenizer of its own.
func (e edgeTokenizer) Detokenize(model string, ids []uint32) (string, bool) {
	m := e.p.Model(model)
	if m == nil {
		return "", false
	}
	return m.Decode(ids)
}

// RenderIDs gives the prompt ids of a chat or completion body for the
// render endpoints (frontend.Renderer), prepared as the request itself
// would be, for a model with a tokenizer of its own and no
// generation_config.json, whose sampling defaults vLLM would put in the
// answer.
func (e edgeTokenizer) RenderIDs(model string, chat bool, body []byte) ([]uint32, bool) {
	if m := e.p.Model(model); m == nil || m.GenerationConfig {
		return nil, false
	}
	kind := tokenize.Completion
	if chat {
		kind = tokenize.Chat
	}
	pr, r := e.p.Prepare(context.Background(), model, kind, body)
	return pr.IDs, r == tokenize.OK
}

// PrepareMessages prepares an Anthropic Messages (or count_tokens) body.
func (e edgeTokenizer) PrepareMessages(model string, count bool, body []byte, _ time.Time) (frontend.Prompt, bool) {
	kind := tokenize.Messages
	if count {
		kind = tokenize.CountTokens
	}
	return e.prepare(model, kind, body)
}

// PrepareResponses prepares an OpenAI Responses body.
func (e edgeTokenizer) PrepareResponses(model string, body []byte, _ time.Time) (frontend.Prompt, bool) {
	return e.prepare(model, tokenize.Responses, body)
}

func (e edgeTokenizer) prepare(model string, kind tokenize.Kind, body []byte) (frontend.Prompt, bool) {
	// tokenizer.max_wait bounds the wait, far inside any request deadline.
	pr, r := e.p.Prepare(context.Background(), model, kind, body)
	if r != tokenize.OK {
		return frontend.Prompt{}, false
	}
	return frontend.Prompt{Tokens: len(pr.IDs), Blocks: pr.Blocks, BlockSize: e.p.BlockSize(model), Batch: pr.Batch}, true
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	path, env, cfg, err := configFlag("serve", args, stderr)
	if err != nil {
		return err
	}
	return runGateway(ctx, false, path, env, cfg, stderr, nil)
}

// configFlag parses the flags of inferrail name (serve or epp): --config
// FILE and llm-d's pool flags, which are laid over the file as the
// environment is, at every reload too. It returns the entries laid over
// and the loaded config.
func configFlag(name string, args []string, stderr io.Writer) (string, []string, *config.Config, error) {
	fs := flag.NewFlagSet("inferrail "+name, flag.ContinueOnError)
	path := fs.String("config", "", "config file (required)")
	pool := addPoolFlags(fs)
	if err := parseFlags(fs, args, stderr, "inferrail "+name+" --config FILE [--pool-name NAME | --endpoint-selector K=V,... --endpoint-target-ports P,...]"); err != nil {
		return "", nil, nil, err
	}
	if *path == "" {
		fmt.Fprintln(stderr, "--config is required")
		return "", nil, nil, errUsage
	}
	env, err := pool.environ(stderr)
	if err != nil {
		return "", nil, nil, err
	}
	cfg, err := config.Load(*path, env)
	return *path, env, cfg, err
}

// serve runs a gateway for cfg until ctx ends, then shuts it down within
// server.shutdown_timeout. ready, when set, is called once it listens.
func serve(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer, ready func(addr, adminAddr string)) error {
	return serveFile(ctx, "", cfg, stdout, stderr, ready)
}

// serveFile is serve for cfg loaded from the file at path: it rereads the
// file every server.reload_interval, on SIGHUP and on POST /admin/reload,
// and applies what may change live. An empty path reloads nothing.
func serveFile(ctx context.Context, path string, cfg *config.Config, stdout, stderr io.Writer, ready func(addr, adminAddr string)) error {
	return runGateway(ctx, false, path, os.Environ(), cfg, stderr, ready)
}

// runGateway is serveFile's startup, shared by serve and epp: the fleet,
// discovery, tokenizers, telemetry, admin port and live reloads (which lay
// env's INFERRAIL_ entries, flags included, over the file), in front of
// the HTTP front end, or with epp of the endpoint picker (ext_proc).
func runGateway(ctx context.Context, epp bool, path string, env []string, cfg *config.Config, stderr io.Writer, ready func(addr, adminAddr string)) error {
	return runGatewayWith(ctx, benchTweaks{}, epp, path, env, cfg, stderr, ready)
}

// benchTweaks are what a benchmark changes in an in-process gateway that
// no config key does.
type benchTweaks struct {
	// keepBillingHeader prepares Anthropic Messages prompts with Claude
	// Code's billing header kept (prompt.Preparer.KeepBillingHeader): the
	// raw-text router of inferrail bench messages.
	keepBillingHeader bool
}

// pool loads cfg's tokenizers into a pool, tweaked.
func (b benchTweaks) pool(cfg *config.Config, set *metrics.Set) *tokenize.Pool {
	if !b.keepBillingHeader {
		return tokenize.New(cfg, hubCache(), set)
	}
	models, statuses := tokenize.LoadAll(cfg, hubCache())
	for _, m := range models {
		if p := m.Preparer(); p != nil {
			// The models are this gateway's alone, not yet shared.
			p.KeepBillingHeader = true
		}
	}
	return tokenize.NewPool(models, statuses, cfg.Tokenizer, set)
}

// runGatewayWith is runGateway with a benchmark's tweaks.
func runGatewayWith(ctx context.Context, tweaks benchTweaks, epp bool, path string, env []string, cfg *config.Config, stderr io.Writer, ready func(addr, adminAddr string)) error {
	log := newLogger(stderr, cfg.Logging)
	secMetrics := metrics.NewSet()
	sec, err := newSecurity(cfg, log, secMetrics)
	if err != nil {
		return err
	}
	scraper := scrape.New(scrape.Options{TLS: sec.upstream})
	defer scraper.Close()
	routingMetrics, tokMetrics := metrics.NewSet(), metrics.NewSet()
	tok := tweaks.pool(cfg, tokMetrics)
	defer tok.Close()
	vocab, noTokenizer := make(map[string]int), make(map[string]bool)
	for _, st := range tok.Status() {
		switch {
		case st.Loaded():
			vocab[st.Model] = st.VocabSize
			log.Info("tokenizer", "status", st.String())
		case st.Err == nil || errors.Is(st.Err, tokenize.ErrNoTokenizer):
			noTokenizer[st.Model] = true
			log.Info("tokenizer", "status", st.String())
		default:
			noTokenizer[st.Model] = true
			log.Warn("tokenizer failed to load", "status", st.String())
		}
	}
	opts := fleet.Options{
		Prober:         health.NewProber().WithTLS(sec.upstream).WithKeys(sec.guard.EngineKey),
		Scraper:        scraper,
		Events:         kvevents.Source{},
		VocabSizes:     vocab,
		NoTokenizer:    noTokenizer,
		Resolver:       net.DefaultResolver,
		Logger:         log,
		RoutingMetrics: routingMetrics,
	}
	if path := cfg.Observability.ShadowLog; path != "" {
		shadowLog, err := jsonl.Open(path, shadowLogQueue, "inferrail_shadow_log_records_total", routingMetrics)
		if err != nil {
			return fmt.Errorf("observability.shadow_log: %w", err)
		}
		// After the fleet stops: every decision its shadows replayed is
		// written.
		defer shadowLog.Close()
		opts.TrialLog = shadowLog
		log.Info("shadow log", "path", path)
	}
	logWarnings(log, cfg)
	fl, err := fleet.Start(cfg, opts)
	if err != nil {
		return err
	}
	defer fl.Stop()
	// The discovery sources stop before the fleet (defers run last first).
	discMetrics := metrics.NewSet()
	disc := startDiscovery(cfg, fl, log, discMetrics)
	defer disc.stop()
	listenKey, listen, adminKey, adminListen := "server.listen", cfg.Server.Listen, "server.admin_listen", cfg.Server.AdminListen
	if epp {
		listenKey, listen, adminKey, adminListen = "ext_proc.listen", cfg.ExtProc.Listen, "ext_proc.admin_listen", cfg.ExtProc.AdminListen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("%s: %w", listenKey, err)
	}
	aln, err := net.Listen("tcp", adminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%s: %w", adminKey, err)
	}
	aln = wrap(aln, sec.admin)
	if !epp {
		ln = wrap(ln, sec.client) // the picker's TLS is gRPC's
	}
	met := telemetry.New(fl)
	for _, m := range cfg.Models {
		arms := fl.Arms(m.Name)
		for _, a := range arms {
			met.ModelPolicy(m.Name, a.Policy, a.Percent)
		}
		if len(arms) > 1 {
			log.Info("A/B split", "model", m.Name, "arms", arms)
		}
	}
	met.Include(routingMetrics)
	met.Include(tokMetrics)
	met.Include(secMetrics)
	met.Include(discMetrics)
	met.Include(telemetry.WriterFunc(tok.WriteCacheMetrics))
	// Without a decision log, decisions are sampled for the fleet page
	// (GET /admin/decisions) alone.
	dlog := decisionlog.Memory()
	if dc := cfg.Observability.DecisionLog; dc.SampleRate > 0 {
		dlogMetrics := metrics.NewSet()
		if dlog, err = decisionlog.Open(dc.Path, dc.SampleRate, dlogMetrics); err != nil {
			ln.Close()
			aln.Close()
			return err
		}
		defer dlog.Close() // after the front end stops: every decision is written
		met.Include(dlogMetrics)
		log.Info("decision log", "path", dc.Path, "sample_rate", dc.SampleRate)
	}
	rlog, err := openRequestLog(cfg, log, met)
	if err != nil {
		ln.Close()
		aln.Close()
		return err
	}
	defer rlog.Close() // after the front end stops: every request is written
	var tracer *tracing.Tracer
	if o := cfg.Observability; o.OTLPEndpoint != "" {
		tp, err := tracing.Start(tracing.Options{Endpoint: o.OTLPEndpoint, SampleRatio: o.TraceSampleRatio,
			ServiceVersion: version, Logger: log})
		if err != nil {
			ln.Close()
			aln.Close()
			return err
		}
		// After the front end stops: the last requests' spans are exported.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("traces: flush at shutdown", "err", err)
			}
		}()
		tracer = tp.Tracer()
		log.Info("traces", "otlp_endpoint", o.OTLPEndpoint, "sample_ratio", o.TraceSampleRatio)
	}
	var fe front
	if epp {
		if cfg.Auth.APIKeys.On() {
			// Envoy sits in front and authenticates; the picker never sees
			// a client's key it could check.
			log.Warn("auth.api_keys is set but inferrail epp checks no API keys: authenticate clients at the gateway in front (Envoy)")
		}
		if cfg.Observability.UsageForAccuracy == config.UsageInject {
			// Envoy relays the body; the picker does not rewrite it.
			log.Warn("observability.usage_for_accuracy is inject but inferrail epp sends requests as the client did: " +
				"a stream whose client asked for no usage counts as unknown in inferrail_prediction_total")
		}
		if fe, err = newPicker(cfg, fl, log, met, edgeTokenizer{tok}, dlog, rlog, sec.extproc, sec.upstream, ln); err != nil {
			ln.Close()
			aln.Close()
			return err
		}
	} else {
		fe = httpFront{frontend.New(frontend.Options{Config: cfg, Fleet: fl, Logger: log, Metrics: met, Tokenizer: edgeTokenizer{tok},
			DecisionLog: dlog, RequestLog: rlog, Tracer: tracer, Auth: sec.guard, UpstreamTLS: sec.upstream}), ln}
	}
	ad := admin.New(fl, met).WithExplain(admin.ExplainOptions{Fleet: fl, Tokenizer: edgeTokenizer{tok},
		Timeout: cfg.Server.RequestTimeout, MaxBody: int(cfg.Server.MaxBodyBytes)}).WithTrials(fl).WithAuth(sec.guard).WithSources(fl).
		WithDecisions(dlog).WithModels(startConfig{cfg}).WithIndexSnapshot(fl)
	// The key, token and engine key files are reread on their own, with or
	// without a config file to reload.
	actx, stopAuth := context.WithCancel(ctx)
	authPolls := make(chan struct{})
	go func() { defer close(authPolls); sec.guard.Run(actx, cfg.Server.ReloadInterval) }()
	defer func() {
		stopAuth()
		<-authPolls
	}()
	if path != "" {
		rl := newReloader(path, cfg, fl, fe, met, log)
		rl.auth, rl.env = sec.guard, env
		ad.WithConfig(rl).WithModels(rl)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		rctx, stopReloads := context.WithCancel(ctx)
		reloads := make(chan struct{})
		go func() { defer close(reloads); rl.run(rctx, cfg.Server.ReloadInterval, hup) }()
		defer func() {
			signal.Stop(hup)
			stopReloads()
			<-reloads
		}()
	}
	// Before the first request: the replicas apply the peer's index ahead
	// of any estimate.
	warmStart(ctx, cfg, fl, log)
	served := make(chan error, 1)
	go func() { served <- fe.serve() }()
	adminServed := make(chan error, 1)
	go func() { adminServed <- ad.Serve(aln) }()
	defer func() {
		ad.Shutdown(context.Background())
		<-adminServed
	}()
	if epp {
		log.Info("endpoint picker listening", "ext_proc", ln.Addr().String(), "health", cfg.ExtProc.HealthListen,
			"admin", aln.Addr().String(), "tls", sec.extproc != nil, "models", len(cfg.Models), "replicas", len(cfg.Replicas))
	} else {
		log.Info("gateway listening", "addr", ln.Addr().String(), "admin", aln.Addr().String(),
			"scheme", scheme(sec.client), "admin_scheme", scheme(sec.admin), "api_keys", cfg.Auth.APIKeys.On(),
			"admin_auth", cfg.Auth.Admin.On(&cfg.TLS), "models", len(cfg.Models), "replicas", len(cfg.Replicas))
	}
	if ready != nil {
		ready(ln.Addr().String(), aln.Addr().String())
	}
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("shutting down", "timeout", cfg.Server.ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
		err = fe.shutdown(sctx)
		cancel()
		if serr := <-served; err == nil {
			err = serr
		}
		if errors.Is(err, context.DeadlineExceeded) {
			log.Warn("shutdown timeout passed with requests still running; they were cut")
			err = nil
		}
	}
	return err
}

// logWarnings logs what the config's scheduling profiles ask for that the
// gateway routes without, and their deprecations, once per config loaded.
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn("config: scheduling profile", "warning", w)
	}
}

// newLogger is the gateway's log as logging.level and logging.format say:
// text (slog's key=value lines) or JSON, one object a line.
func newLogger(w io.Writer, lc config.Logging) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevel(lc.Level)}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if l.UnmarshalText([]byte(s)) != nil {
		return slog.LevelInfo
	}
	return l
}

func runLaunch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail launch", flag.ContinueOnError)
	n := fs.Int("replicas", 3, "simulated engines to start")
	listen := fs.String("listen", "127.0.0.1:8080", "gateway client address")
	adminListen := fs.String("admin-listen", "127.0.0.1:9090", "gateway admin address (/metrics, /admin/replicas)")
	policy := fs.String("policy", "cost_model", "routing policy")
	split := fs.String("split", "", "an A/B split instead of --policy, e.g. cost_model=75,round_robin=25 (routing.split)")
	events := fs.Bool("kv-events", false, "the simulators publish their KV events on loopback and the gateway follows them (exact cache predictions)")
	tlsDir := fs.String("tls-dir", "", "serve both ports over https: a development CA and a certificate for localhost are made in this directory (clients trust its ca.pem)")
	apiKey := fs.String("api-key", "", "require this API key on the client port (Authorization: Bearer or x-api-key), as vLLM's --api-key")
	requestLog := fs.String("request-log", "", "write a line per request to this file (observability.request_log), for inferrail whatif to replay")
	simOpts := sim.DefaultOptions()
	simOpts.EnablePromptTokensDetails = true // usage shows the engine's cache hits next to the prediction
	simOpts.RegisterFlags(fs)
	if err := parseFlags(fs, args, stderr, "inferrail launch [flags]"); err != nil {
		return err
	}
	if *n < 1 {
		fmt.Fprintln(stderr, "--replicas must be at least 1")
		return errUsage
	}
	simOpts.Port = 0
	sims, replicas, err := startSims(*n, simOpts, *events)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()
	cfg := config.Default()
	cfg.Server.Listen = *listen
	cfg.Server.AdminListen = *adminListen
	cfg.Routing.DefaultPolicy = *policy
	mode := *policy
	if *split != "" {
		sp, err := parseSplit(*split)
		if err != nil {
			fmt.Fprintf(stderr, "--split: %v\n", err)
			return errUsage
		}
		cfg.Routing.Split, mode = sp, "split "+*split
	}
	m := config.NewModel(simOpts.Model, "sim")
	m.Tokenizer = tokenize.Sim // the simulators' own tokenizer: predictions are exact
	m.BlockSize = simOpts.Engine.BlockSize
	cfg.Models = []config.Model{m}
	cfg.Replicas = replicas
	web := "http"
	if *tlsDir != "" {
		f, err := certs.WriteDevFiles(*tlsDir)
		if err != nil {
			return fmt.Errorf("--tls-dir: %w", err)
		}
		l := config.TLSListener{CertFile: f.Cert, KeyFile: f.Key}
		cfg.TLS.Listen, cfg.TLS.AdminListen, web = l, l, "https"
	}
	cfg.Observability.RequestLog.Path = *requestLog
	if *apiKey != "" {
		cfg.Auth.APIKeys.Keys = []config.APIKey{{ID: "launch", Tenant: "launch", SHA256: config.HashKey(*apiKey)}}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *events {
		mode += ", following their KV events"
	}
	return serve(ctx, cfg, stdout, stderr, func(addr, adminAddr string) {
		fmt.Fprintf(stdout, "inferrail launch: gateway on %s://%s in front of %d simulated engines (%s)\n", web, addr, len(sims), mode)
		fmt.Fprintf(stdout, "  admin  %[1]s://%[2]s/metrics  %[1]s://%[2]s/admin/replicas  POST %[1]s://%[2]s/admin/explain/v1/chat/completions\n",
			web, adminAddr)
		if *tlsDir != "" {
			fmt.Fprintf(stdout, "  tls    CA %s (curl --cacert, NODE_EXTRA_CA_CERTS)\n", filepath.Join(*tlsDir, "ca.pem"))
		}
		for i, s := range sims {
			fmt.Fprintf(stdout, "  sim-%d  %s\n", i, s.URL())
		}
		fmt.Fprintf(stdout, "\nTry:\n  curl -s %[1]s://%[2]s/v1/chat/completions -H 'content-type: application/json' \\\n"+
			"    -d '{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16}'\n"+
			"  ANTHROPIC_BASE_URL=%[1]s://%[2]s ANTHROPIC_MODEL=sim claude   # Claude Code, through /v1/messages\n\n", web, addr)
	})
}

// startSims starts n simulators with opts and returns them with their
// replica entries, sim-0 to sim-<n-1>. With events each publishes its KV
// events, with replay, on loopback ports the kernel picks, and its entry
// subscribes to them; in opts.KVEventsFormat's schema (vllm or sglang), which
// the entries' engine_type names. A KVEventsConfig already in opts is kept
// (it must bind loopback ports the kernel picks).
func startSims(n int, opts sim.Options, events bool) ([]*sim.Server, []config.Replica, error) {
	if events && opts.KVEventsConfig == "" {
		opts.KVEventsConfig = `{"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:0", "replay_endpoint": "tcp://127.0.0.1:0"}`
		if kvevent.Engine(opts.KVEventsFormat) == kvevent.EngineSGLang {
			opts.KVEventsConfig = `{"publisher": "zmq", "endpoint": "tcp://127.0.0.1:0", "replay_endpoint": "tcp://127.0.0.1:0"}`
		}
	}
	if events {
		opts.KVEventsBind = true // the engine would connect to an address without "*"
	}
	sims, err := sim.StartN(n, opts)
	if err != nil {
		return nil, nil, err
	}
	replicas := make([]config.Replica, len(sims))
	for i, s := range sims {
		replicas[i] = config.NewReplica("sim-"+strconv.Itoa(i), s.URL(), opts.Model)
		if events {
			replicas[i].KVEvents, replicas[i].KVEventsReplay = s.EventEndpoints()
			if opts.KVEventsFormat != "" {
				replicas[i].EngineType = opts.KVEventsFormat
			}
		}
	}
	return sims, replicas, nil
}

// parseSplit reads --split: policy=percent pairs separated by commas.
func parseSplit(s string) (map[string]int, error) {
	out := map[string]int{}
	for part := range strings.SplitSeq(s, ",") {
		name, pct, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(pct)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q: want policy=percent, e.g. cost_model=75", part)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s named twice", name)
		}
		out[name] = n
	}
	return out, nil
}

// startConfig is the config the gateway started with, generation 1, for
// GET /admin/models when there is no file to reload.
type startConfig struct{ cfg *config.Config }

func (c startConfig) Current() (*config.Config, uint64) { return c.cfg, 1 }
