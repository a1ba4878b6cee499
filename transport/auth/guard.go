package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
)

// maxFileBytes bounds a key, token or engine key file.
const maxFileBytes = 16 * config.MaxBytes

// The kinds of file a Guard reads, as the file label of
// inferrail_auth_reloads_total names them.
const (
	fileAPIKeys    = "api_keys"
	fileAdminToken = "admin_token"
	fileEngineKey  = "engine_key"
)

// Options configure a Guard.
type Options struct {
	// Logger gets reloads and failures, never a key; nil discards.
	Logger *slog.Logger
	// Metrics gets the Guard's series; nil keeps them in a set of its own.
	Metrics *metrics.Set
}

// Guard checks credentials on both ports and holds the engines' keys. It
// is safe for concurrent use: checks read immutable sets through atomic
// pointers, and Apply and Reload, serialized, publish new ones.
type Guard struct {
	log *slog.Logger
	set *metrics.Set

	keys   atomic.Pointer[keySet]
	admin  atomic.Pointer[adminSet]
	engine atomic.Pointer[engineSet]

	mu    sync.Mutex // serializes Apply and Reload; guards cfg and files
	cfg   *config.Config
	files map[string]*file // by path

	clientMissing, clientInvalid, adminMissing, adminInvalid *metrics.Counter
	keyCount                                                 atomic.Int64
}

// file is what a Guard last read from one file.
type file struct {
	kind  string
	bytes []byte // as last read, nil after a failed read
	val   any    // parsed from the last good bytes
	// failed is the last failure logged, so one bad edit is logged once.
	failed string
}

// adminSet is the admin port's credentials in effect.
type adminSet struct {
	on            bool
	token         [sha256.Size]byte
	hasToken      bool
	mtls          bool
	metricsPublic bool
}

// engineSet is the engines' keys in effect, as Authorization values.
type engineSet struct {
	byID  map[string][]byte
	byURL map[string]string
	def   []byte
	// strip: the client's credentials are never forwarded.
	strip bool
}

// New reads every file cfg names and returns a Guard for it. A file that
// cannot be read or parsed fails New, as a bad config fails startup.
func New(cfg *config.Config, o Options) (*Guard, error) {
	g := &Guard{log: o.Logger, set: o.Metrics, files: map[string]*file{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.set == nil {
		g.set = metrics.NewSet()
	}
	g.clientMissing = g.set.NewCounter(`inferrail_auth_failures_total{port="client",reason="missing"}`)
	g.clientInvalid = g.set.NewCounter(`inferrail_auth_failures_total{port="client",reason="invalid"}`)
	g.adminMissing = g.set.NewCounter(`inferrail_auth_failures_total{port="admin",reason="missing"}`)
	g.adminInvalid = g.set.NewCounter(`inferrail_auth_failures_total{port="admin",reason="invalid"}`)
	g.set.NewGauge(`inferrail_auth_keys`, func() float64 { return float64(g.keyCount.Load()) })
	for _, kind := range []string{fileAPIKeys, fileAdminToken, fileEngineKey} {
		for _, result := range []string{"applied", "rejected"} {
			g.reloads(kind, result)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.build(cfg, true); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *Guard) reloads(kind, result string) *metrics.Counter {
	return g.set.GetOrCreateCounter(`inferrail_auth_reloads_total{file="` + kind + `",result="` + result + `"}`)
}

// Apply puts a reloaded config's auth section and key files in effect,
// rereading every file it names.
func (g *Guard) Apply(cfg *config.Config) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.build(cfg, false)
}

// Reload rereads the files of the config in effect and applies those whose
// bytes changed (SIGHUP, POST /admin/reload, and every Run tick).
func (g *Guard) Reload() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.build(g.cfg, false)
}

// Run calls Reload every interval until ctx ends; 0 never.
func (g *Guard) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Reload()
		}
	}
}

// build reads cfg's files and publishes the sets they and cfg make. At
// startup any failure is returned; on a reload a file that fails keeps
// what it last gave while its path stays the same, and gives nothing (keys
// on, none accepted) for a new path. Under mu.
func (g *Guard) build(cfg *config.Config, startup bool) error {
	cfgChanged := cfg != g.cfg
	files := map[string]*file{}
	var errs []error
	load := func(key, path, kind string, parse func([]byte) (any, error)) any {
		if path == "" {
			return nil
		}
		if f := files[path]; f != nil {
			return f.val
		}
		f, prev := &file{kind: kind}, g.files[path]
		if prev != nil && prev.kind == kind {
			*f = *prev
		}
		files[path] = f
		b, err := readFile(path)
		if err == nil && prev != nil && prev.kind == kind && bytes.Equal(b, prev.bytes) && !(cfgChanged && kind == fileAPIKeys) {
			return f.val
		}
		var v any
		if err == nil {
			v, err = parse(b)
		}
		if err != nil {
			err = fmt.Errorf("%s %s: %w", key, path, err)
			errs = append(errs, err)
			if !startup && f.failed != err.Error() {
				f.failed = err.Error()
				g.reloads(kind, "rejected").Inc()
				g.log.Error("auth file reload failed; what it last gave stays in effect", "key", key, "path", path, "err", err)
			}
			f.bytes = nil
			return f.val
		}
		changed := prev != nil && !bytes.Equal(b, prev.bytes)
		f.bytes, f.val, f.failed = b, v, ""
		if !startup && changed {
			g.reloads(kind, "applied").Inc()
			g.log.Info("auth file reloaded", "key", key, "path", path)
		}
		return v
	}

	keys := append([]config.APIKey(nil), cfg.Auth.APIKeys.Keys...)
	if v := load("auth.api_keys.file", cfg.Auth.APIKeys.File, fileAPIKeys, func(b []byte) (any, error) {
		return config.ParseAPIKeys(b, cfg.Auth.APIKeys.Keys)
	}); v != nil {
		keys = append(keys, v.([]config.APIKey)...)
	}
	ks, err := newKeySet(cfg, keys, g.set)
	if err != nil {
		errs = append(errs, err)
		ks = &keySet{on: true}
	}

	as := &adminSet{on: cfg.Auth.Admin.On(&cfg.TLS), mtls: cfg.TLS.AdminListen.ClientCAFile != "",
		metricsPublic: cfg.Auth.Admin.MetricsPublic}
	if h := cfg.Auth.Admin.TokenSHA256; h != "" {
		if n, err := hex.Decode(as.token[:], []byte(h)); err == nil && n == sha256.Size {
			as.hasToken = true
		}
	}
	if v := load("auth.admin.token_file", cfg.Auth.Admin.TokenFile, fileAdminToken, parseToken); v != nil {
		as.token, as.hasToken = v.([sha256.Size]byte), true
	}

	es := &engineSet{byID: map[string][]byte{}, byURL: map[string]string{},
		strip: cfg.Auth.APIKeys.On() || cfg.Upstream.APIKeyFile != ""}
	if v := load("upstream.api_key_file", cfg.Upstream.APIKeyFile, fileEngineKey, parseEngineKey); v != nil {
		es.def = v.([]byte)
	}
	for i := range cfg.Replicas {
		r := &cfg.Replicas[i]
		if v := load(fmt.Sprintf("replicas[%d].api_key_file", i), r.APIKeyFile, fileEngineKey, parseEngineKey); v != nil {
			es.byID[r.ID] = v.([]byte)
			es.byURL[strings.TrimRight(r.URL, "/")] = string(v.([]byte))
			es.strip = true
		}
	}

	if startup && len(errs) > 0 {
		return errors.Join(errs...)
	}
	g.cfg, g.files = cfg, files
	g.keys.Store(ks)
	g.keyCount.Store(int64(len(keys)))
	g.admin.Store(as)
	g.engine.Store(es)
	return nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return b, nil
}

// secretValue is a token or engine key file's value: its bytes without the
// whitespace around them, on one line.
func secretValue(b []byte) ([]byte, error) {
	v := bytes.TrimSpace(b)
	switch {
	case len(v) == 0:
		return nil, errors.New("empty")
	case bytes.ContainsAny(v, " \t\r\n"):
		return nil, errors.New("holds whitespace inside the value; want the value alone")
	}
	return v, nil
}

func parseToken(b []byte) (any, error) {
	v, err := secretValue(b)
	if err != nil {
		return nil, err
	}
	return sha256.Sum256(v), nil
}

func parseEngineKey(b []byte) (any, error) {
	v, err := secretValue(b)
	if err != nil {
		return nil, err
	}
	return append([]byte("Bearer "), v...), nil
}

// Client checks a client port request for path. It returns the request's
// identity (nil when the port needs no key, or the path is public and no
// good key came with it), or the 401 to answer with. It counts failures;
// the caller counts a request it serves with Identity.CountRequest.
func (g *Guard) Client(h *fasthttp.RequestHeader, path []byte) (*Identity, *openai.Error) {
	ks := g.keys.Load()
	if !ks.on {
		return nil, nil
	}
	key, err := requestCredential(h, true)
	var id *Identity
	if err == nil {
		if id = ks.lookup(key); id == nil {
			err = ErrInvalid
		}
	}
	if ks.isPublic(path) {
		return id, nil
	}
	switch {
	case errors.Is(err, ErrMissing):
		g.clientMissing.Inc()
		return nil, errMissingKey
	case err != nil:
		g.clientInvalid.Inc()
		return nil, errInvalidKey
	}
	return id, nil
}

// ClientOn reports whether the client port needs keys.
func (g *Guard) ClientOn() bool { return g.keys.Load().on }

// Admin checks an admin port request: nil when it may go on, else the 401
// to answer with.
func (g *Guard) Admin(ctx *fasthttp.RequestCtx) *openai.Error {
	as := g.admin.Load()
	if !as.on || (as.metricsPublic && string(ctx.Path()) == "/metrics") {
		return nil
	}
	if as.mtls && ctx.IsTLS() {
		if st := ctx.TLSConnectionState(); st != nil && len(st.VerifiedChains) > 0 {
			return nil
		}
	}
	key, err := requestCredential(&ctx.Request.Header, false)
	if err == nil {
		sum := sha256.Sum256(key)
		if !as.hasToken || subtle.ConstantTimeCompare(sum[:], as.token[:]) != 1 {
			err = ErrInvalid
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrMissing):
		g.adminMissing.Inc()
	default:
		g.adminInvalid.Inc()
	}
	return errAdmin
}

// EngineAuth sets the Authorization an attempt on replica carries: the
// replica's engine key, else upstream.api_key_file's, else, while neither
// that nor client keys are on, the client's own headers stay as they came.
func (g *Guard) EngineAuth(h *fasthttp.RequestHeader, replica string) {
	es := g.engine.Load()
	if !es.strip {
		return
	}
	h.Del(headerAuthorization)
	h.Del(headerAPIKey)
	v, ok := es.byID[replica]
	if !ok {
		v = es.def
	}
	if v != nil {
		h.SetBytesV(headerAuthorization, v)
	}
}

// ManagesEngineKeys reports whether the gateway, not the client, gives the
// engines their credentials: an engine's 401 is then the gateway's doing.
func (g *Guard) ManagesEngineKeys() bool { return g.engine.Load().strip }

// EngineKey returns the Authorization value for the engine at base URL,
// for the health checks' GET /v1/models; "" for none.
func (g *Guard) EngineKey(base string) string {
	es := g.engine.Load()
	if v, ok := es.byURL[strings.TrimRight(base, "/")]; ok {
		return v
	}
	return string(es.def)
}

// AdminToken reads the admin token itself from auth.admin.token_file, for a
// request this instance makes to a peer's admin port (index.warm_start_from:
// the instances of one fleet share the token). It returns nil without a
// token file.
func AdminToken(cfg *config.Config) ([]byte, error) {
	path := cfg.Auth.Admin.TokenFile
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth.admin.token_file: %w", err)
	}
	v, err := secretValue(b)
	if err != nil {
		return nil, fmt.Errorf("auth.admin.token_file %s: %w", path, err)
	}
	return v, nil
}
