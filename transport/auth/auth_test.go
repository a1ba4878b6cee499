package auth

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
)

// Keys used by the tests; none may ever show in a log line or a metric.
const (
	keyA     = "sk-test-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB     = "sk-test-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	keyInCfg = "sk-test-config-cccccccccccccccccccccccc"
	token    = "admin-token-dddddddddddddddddddddddddddd"
)

var secrets = []string{keyA, keyB, keyInCfg, token}

func TestBearer(t *testing.T) {
	f := func(in, want string, ok bool) {
		t.Helper()
		got, gotOK := bearer([]byte(in))
		if gotOK != ok || string(got) != want {
			t.Errorf("bearer(%q) = %q, %v; want %q, %v", in, got, gotOK, want, ok)
		}
	}
	f("Bearer abc", "abc", true)
	f("bearer abc", "abc", true)
	f("BEARER abc", "abc", true)
	f("bEaReR \t abc  ", "abc", true)
	f("  Bearer abc", "abc", true)
	f("Bearer", "", false)
	f("Bearer ", "", false)
	f("Bearerabc", "", false)
	f("Basic abc", "", false)
	f("Bearer a b", "", false)
	f("Token abc", "", false)
	f("", "", false)
}

func TestCredential(t *testing.T) {
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	f := func(auths, apiKeys [][]byte, allowAPIKey bool, want string, wantErr error) {
		t.Helper()
		got, err := credential(auths, apiKeys, allowAPIKey)
		if !errors.Is(err, wantErr) || string(got) != want {
			t.Errorf("credential(%q, %q) = %q, %v; want %q, %v", auths, apiKeys, got, err, want, wantErr)
		}
	}
	f(nil, nil, true, "", ErrMissing)
	f(b("Bearer k"), nil, true, "k", nil)
	f(nil, b("k"), true, "k", nil)
	f(nil, b(" k "), true, "k", nil)
	f(b("Bearer k"), b("k"), true, "k", nil)
	f(b("Bearer k", "Bearer k"), nil, true, "k", nil)
	f(b("Bearer k", "Bearer j"), nil, true, "", ErrInvalid)
	f(b("Bearer k"), b("j"), true, "", ErrInvalid)
	f(b("Basic k"), b("k"), true, "", ErrInvalid)
	f(nil, b(""), true, "", ErrInvalid)
	f(nil, b("k", "j"), true, "", ErrInvalid)
	// The admin port reads Authorization alone.
	f(nil, b("k"), false, "", ErrMissing)
	f(b("Bearer k"), b("j"), false, "k", nil)
}

// header parses a raw request head, so header names arrive as a client
// sent them, in any case and repeated.
func header(t testing.TB, path string, lines ...string) *fasthttp.RequestHeader {
	t.Helper()
	raw := "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(lines, "\r\n")
	if len(lines) > 0 {
		raw += "\r\n"
	}
	raw += "\r\n"
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	return &h
}

// logBuffer collects a Guard's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a Guard over a key file in a temporary directory.
type fixture struct {
	t    testing.TB
	dir  string
	cfg  *config.Config
	g    *Guard
	set  *metrics.Set
	logs *logBuffer
}

func (f *fixture) write(name, content string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// newFixture builds a config with two models, keyInCfg in the config and
// the key file holding keyFile, edited by edit, and a Guard for it.
func newFixture(t testing.TB, keyFile string, edit func(f *fixture)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), set: metrics.NewSet(), logs: &logBuffer{}}
	c := config.Default()
	c.Models = []config.Model{config.NewModel("m1", "one"), config.NewModel("m2")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m1", "m2")}
	c.Auth.APIKeys.File = f.write("keys.yaml", keyFile)
	c.Auth.APIKeys.Keys = []config.APIKey{{ID: "cfg", SHA256: config.HashKey(keyInCfg), Models: []string{"one"}}}
	f.cfg = c
	if edit != nil {
		edit(f)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Metrics: f.set})
	if err != nil {
		t.Fatal(err)
	}
	f.g = g
	t.Cleanup(f.noSecrets)
	return f
}

// noSecrets fails the test if a key or token shows in the Guard's log or
// metrics.
func (f *fixture) noSecrets() {
	var m bytes.Buffer
	f.set.WritePrometheus(&m)
	for _, s := range secrets {
		for _, where := range []struct{ name, text string }{{"log", f.logs.String()}, {"metrics", m.String()}} {
			if strings.Contains(where.text, s) || strings.Contains(where.text, config.HashKey(s)) {
				f.t.Errorf("a secret shows in the %s:\n%s", where.name, where.text)
			}
		}
	}
}

const twoKeys = `keys:
  - id: a
    tenant: team-a
    key: ` + keyA + `
  - id: b
    sha256: `

func twoKeyFile() string { return twoKeys + config.HashKey(keyB) + "\n" }

func TestClientKeys(t *testing.T) {
	f := newFixture(t, twoKeyFile(), nil)
	ok := func(want string, lines ...string) {
		t.Helper()
		id, e := f.g.Client(header(t, "/v1/chat/completions", lines...), []byte("/v1/chat/completions"))
		if e != nil || id == nil || id.KeyID != want {
			t.Errorf("%q: got %+v, %v; want key %s", lines, id, e, want)
		}
	}
	refused := func(code string, msg string, lines ...string) {
		t.Helper()
		id, e := f.g.Client(header(t, "/v1/chat/completions", lines...), []byte("/v1/chat/completions"))
		if id != nil || e == nil || e.Status != 401 || e.Code != code || e.Type != "invalid_request_error" || !strings.Contains(e.Message, msg) {
			t.Errorf("%q: got %+v, %+v; want 401 %s", lines, id, e, code)
		}
	}
	ok("a", "Authorization: Bearer "+keyA)
	ok("a", "authorization: bearer "+keyA)
	ok("a", "AUTHORIZATION: BEARER "+keyA)
	ok("a", "x-api-key: "+keyA)
	ok("a", "X-API-KEY: "+keyA)
	ok("b", "X-Api-Key: "+keyB)
	ok("cfg", "Authorization: Bearer "+keyInCfg)
	ok("a", "Authorization: Bearer "+keyA, "Authorization: Bearer "+keyA)
	ok("a", "Authorization: Bearer "+keyA, "x-api-key: "+keyA)

	refused("invalid_api_key", "didn't provide")
	refused("invalid_api_key", "didn't provide", "X-Other: "+keyA)
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer sk-wrong")
	last := keyA[:len(keyA)-1]
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+last+"b")     // off by a byte
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+last)         // a byte short
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+keyA+"a")     // a byte long
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+"S"+keyA[1:]) // first byte's case
	refused("invalid_api_key", "Incorrect", "Authorization: Basic "+keyA)
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+keyA, "Authorization: Bearer "+keyB)
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+keyA, "x-api-key: "+keyB)
	refused("invalid_api_key", "Incorrect", "x-api-key: "+keyA, "x-api-key: "+keyB)
	refused("invalid_api_key", "Incorrect", "Authorization: Bearer "+config.HashKey(keyA)) // the hash is not the key

	// Neither answer names a key or tells which exist.
	for _, e := range []string{errMissingKey.Message, errInvalidKey.Message} {
		for _, s := range []string{"a", "b", "cfg", "team-a"} {
			if strings.Contains(" "+e+" ", " "+s+" ") {
				t.Errorf("%q names %q", e, s)
			}
		}
	}
	var m bytes.Buffer
	f.set.WritePrometheus(&m)
	if !strings.Contains(m.String(), `inferrail_auth_failures_total{port="client",reason="invalid"} 10`) ||
		!strings.Contains(m.String(), `inferrail_auth_failures_total{port="client",reason="missing"} 2`) ||
		!strings.Contains(m.String(), `inferrail_auth_keys 3`) {
		t.Errorf("metrics:\n%s", m.String())
	}
}

func TestIdentity(t *testing.T) {
	f := newFixture(t, twoKeyFile(), nil)
	a, _ := f.g.Client(header(t, "/v1/completions", "Authorization: Bearer "+keyA), []byte("/v1/completions"))
	c, _ := f.g.Client(header(t, "/v1/completions", "Authorization: Bearer "+keyInCfg), []byte("/v1/completions"))
	if a.Tenant != "team-a" || a.Restricted() || !a.Allows("m2") {
		t.Errorf("a = %+v", a)
	}
	// cfg may use m1 (listed by its alias) and nothing else.
	if c.Tenant != "cfg" || !c.Restricted() || !c.Allows("m1") || c.Allows("m2") || c.Allows("one") {
		t.Errorf("cfg = %+v", c)
	}
	a.CountRequest()
	a.CountRequest()
	var nobody *Identity
	nobody.CountRequest()
	if !nobody.Allows("m1") || nobody.Restricted() {
		t.Error("a nil identity must allow every model")
	}
	var m bytes.Buffer
	f.set.WritePrometheus(&m)
	if !strings.Contains(m.String(), `inferrail_tenant_requests_total{tenant="team-a",key="a"} 2`) {
		t.Errorf("metrics:\n%s", m.String())
	}
}

func TestPublicPaths(t *testing.T) {
	f := newFixture(t, twoKeyFile(), nil)
	// /health is public by default; /v1/models is not.
	if id, e := f.g.Client(header(t, "/health"), []byte("/health")); id != nil || e != nil {
		t.Errorf("/health without a key: %v, %v", id, e)
	}
	if _, e := f.g.Client(header(t, "/v1/models"), []byte("/v1/models")); e == nil || e.Status != 401 {
		t.Errorf("/v1/models without a key: %v", e)
	}
	f = newFixture(t, twoKeyFile(), func(f *fixture) { f.cfg.Auth.PublicPaths = []string{"/v1/models"} })
	if _, e := f.g.Client(header(t, "/health"), []byte("/health")); e == nil {
		t.Error("/health is no longer public")
	}
	// A good key on a public path still says who it is; a bad one is
	// ignored there.
	if id, e := f.g.Client(header(t, "/v1/models", "x-api-key: "+keyA), []byte("/v1/models")); e != nil || id.KeyID != "a" {
		t.Errorf("/v1/models with a key: %v, %v", id, e)
	}
	if id, e := f.g.Client(header(t, "/v1/models", "x-api-key: nope"), []byte("/v1/models")); e != nil || id != nil {
		t.Errorf("/v1/models with a bad key: %v, %v", id, e)
	}
}

func TestKeyFileReload(t *testing.T) {
	f := newFixture(t, twoKeyFile(), nil)
	check := func(key string, want bool) {
		t.Helper()
		_, e := f.g.Client(header(t, "/v1/completions", "x-api-key: "+key), []byte("/v1/completions"))
		if (e == nil) != want {
			t.Errorf("key %s accepted = %v, want %v", key[:10], e == nil, want)
		}
	}
	check(keyA, true)
	check(keyB, true)
	f.write("keys.yaml", "keys:\n  - {id: b2, key: "+keyB+"}\n")
	f.g.Reload()
	check(keyA, false)
	check(keyB, true)
	if !strings.Contains(f.logs.String(), "auth file reloaded") {
		t.Errorf("no reload logged:\n%s", f.logs)
	}

	// A broken file (here a key given twice, once by hash) keeps the keys
	// in effect, and is logged once, however often it is reread.
	f.write("keys.yaml", "keys:\n  - {id: x, key: "+keyA+"}\n  - {id: y, sha256: "+config.HashKey(keyA)+"}\n")
	f.g.Reload()
	f.g.Reload()
	check(keyA, false)
	check(keyB, true)
	if n := strings.Count(f.logs.String(), "auth file reload failed"); n != 1 {
		t.Errorf("failure logged %d times:\n%s", n, f.logs)
	}
	// So does a file that is gone.
	os.Remove(filepath.Join(f.dir, "keys.yaml"))
	f.g.Reload()
	check(keyB, true)
	var m bytes.Buffer
	f.set.WritePrometheus(&m)
	if !strings.Contains(m.String(), `inferrail_auth_reloads_total{file="api_keys",result="rejected"} 2`) ||
		!strings.Contains(m.String(), `inferrail_auth_reloads_total{file="api_keys",result="applied"} 1`) {
		t.Errorf("metrics:\n%s", m.String())
	}
	// Fixed, the file is applied again.
	f.write("keys.yaml", "keys:\n  - {id: a, key: "+keyA+"}\n")
	f.g.Reload()
	check(keyA, true)
	check(keyB, false)

	// A config reload applies its own keys and keeps the file's.
	next := *f.cfg
	next.Auth.APIKeys.Keys = nil
	f.g.Apply(&next)
	check(keyInCfg, false)
	check(keyA, true)
}

func TestStartupFailures(t *testing.T) {
	c := config.Default()
	c.Models = []config.Model{config.NewModel("m")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m")}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	for name, edit := range map[string]func(){
		"missing key file": func() { c.Auth.APIKeys.File = filepath.Join(dir, "none.yaml") },
		"key of digits":    func() { c.Auth.APIKeys.File = write("k.yaml", "keys: [{id: a, key: 123456789012}]") },
		"empty token":      func() { c.Auth.Admin.TokenFile = write("t", " \n") },
		"engine key space": func() { c.Upstream.APIKeyFile = write("e", "a b") },
	} {
		t.Run(name, func(t *testing.T) {
			c.Auth.APIKeys.File, c.Auth.Admin.TokenFile, c.Upstream.APIKeyFile = "", "", ""
			edit()
			_, err := New(c, Options{})
			if err == nil {
				t.Fatal("New succeeded")
			}
			if strings.Contains(err.Error(), "123456789012") {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

func adminCtx(t *testing.T, path string, lines ...string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	h := header(t, path, lines...)
	h.CopyTo(&ctx.Request.Header)
	return &ctx
}

func TestAdmin(t *testing.T) {
	f := newFixture(t, twoKeyFile(), func(f *fixture) {
		f.cfg.Auth.Admin.TokenFile = f.write("token", token+"\n")
	})
	for _, c := range []struct {
		path  string
		lines []string
		ok    bool
	}{
		{"/admin/config", []string{"Authorization: Bearer " + token}, true},
		{"/admin/config", []string{"authorization: BEARER " + token}, true},
		{"/metrics", []string{"Authorization: Bearer " + token}, true},
		{"/admin/config", nil, false},
		{"/metrics", nil, false},
		{"/admin/config", []string{"x-api-key: " + token}, false}, // Bearer only
		{"/admin/config", []string{"Authorization: Bearer " + token[:len(token)-1]}, false},
		{"/admin/config", []string{"Authorization: Bearer " + token + "x"}, false},
		{"/admin/config", []string{"Authorization: Bearer " + keyA}, false}, // a client key is not the token
		{"/admin/config", []string{"Authorization: Bearer " + token, "Authorization: Bearer x"}, false},
	} {
		e := f.g.Admin(adminCtx(t, c.path, c.lines...))
		if (e == nil) != c.ok || (e != nil && e.Status != 401) {
			t.Errorf("%s %q: %v, want ok %v", c.path, c.lines, e, c.ok)
		}
	}

	// metrics_public opens /metrics alone; a token given by its hash works
	// as the file's.
	f = newFixture(t, twoKeyFile(), func(f *fixture) {
		f.cfg.Auth.Admin.TokenSHA256 = config.HashKey(token)
		f.cfg.Auth.Admin.MetricsPublic = true
	})
	if e := f.g.Admin(adminCtx(t, "/metrics")); e != nil {
		t.Errorf("/metrics: %v", e)
	}
	if e := f.g.Admin(adminCtx(t, "/admin/replicas")); e == nil {
		t.Error("/admin/replicas open")
	}
	if e := f.g.Admin(adminCtx(t, "/admin/replicas", "Authorization: Bearer "+token)); e != nil {
		t.Errorf("/admin/replicas with the token: %v", e)
	}
}

func TestEngineAuth(t *testing.T) {
	f := newFixture(t, twoKeyFile(), func(f *fixture) {
		f.cfg.Upstream.APIKeyFile = f.write("engine", "fleet-key\n")
		f.cfg.Replicas = append(f.cfg.Replicas, config.NewReplica("r1", "http://127.0.0.1:2/", "m1"))
		f.cfg.Replicas[1].APIKeyFile = f.write("engine-r1", "r1-key")
	})
	set := func(replica string) *fasthttp.RequestHeader {
		h := header(t, "/v1/completions", "Authorization: Bearer "+keyA, "X-Api-Key: "+keyA, "X-Other: kept")
		f.g.EngineAuth(h, replica)
		return h
	}
	for replica, want := range map[string]string{"r0": "Bearer fleet-key", "r1": "Bearer r1-key", "dns-1.2.3.4-80": "Bearer fleet-key"} {
		h := set(replica)
		if got := h.PeekAll("Authorization"); len(got) != 1 || string(got[0]) != want || h.Peek("X-Api-Key") != nil || string(h.Peek("X-Other")) != "kept" {
			t.Errorf("%s: %s", replica, h.String())
		}
	}
	if got := f.g.EngineKey("http://127.0.0.1:2"); got != "Bearer r1-key" {
		t.Errorf("EngineKey(r1) = %q", got)
	}
	if got := f.g.EngineKey("http://10.0.0.1:8000"); got != "Bearer fleet-key" {
		t.Errorf("EngineKey(other) = %q", got)
	}

	// Without client keys or engine keys the client's headers pass as they
	// came; with client keys alone they are dropped.
	c := config.Default()
	c.Models = []config.Model{config.NewModel("m")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m")}
	open, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := header(t, "/v1/completions", "Authorization: Bearer engine-key")
	open.EngineAuth(h, "r0")
	if string(h.Peek("Authorization")) != "Bearer engine-key" {
		t.Errorf("passthrough lost: %s", h.String())
	}
	c.Auth.APIKeys.Keys = []config.APIKey{{ID: "k", SHA256: config.HashKey(keyA)}}
	closed, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h = header(t, "/v1/completions", "Authorization: Bearer "+keyA)
	closed.EngineAuth(h, "r0")
	if h.Peek("Authorization") != nil {
		t.Errorf("the client's key went on: %s", h.String())
	}
}
