package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/knadh/koanf/v2"

	"github.com/inferrail/inferrail/model/sched"
)

// Auth configures who may use the gateway: API keys on the client port and
// a bearer token on the admin port. Live: a reload changes keys, public
// paths and the admin settings for the requests that follow. Neither the
// config nor the gateway's memory holds a key: keys given in the config are
// given by their SHA-256, and keys read from files are hashed as they are
// read.
type Auth struct {
	// APIKeys turns on API keys on the client port: once a file or a key is
	// set, every request to a path not in public_paths needs a key, in
	// Authorization: Bearer KEY (OpenAI's SDKs) or x-api-key: KEY
	// (Anthropic's). A request without one, or with one the gateway does not
	// know, gets 401 with code invalid_api_key. Default: no keys, the client
	// port is open.
	APIKeys APIKeys `koanf:"api_keys"`
	// PublicPaths lists the client port paths served without a key while
	// API keys are on: /health and /v1/models may be listed. Default
	// [/health], so load balancers and Kubernetes probes need no key, as
	// vLLM's --api-key leaves /health open. [] guards both.
	PublicPaths []string `koanf:"public_paths"`
	// Admin guards the admin port.
	Admin AdminAuth `koanf:"admin"`
}

// APIKeys lists the client port's keys.
type APIKeys struct {
	// File is a YAML or JSON file of keys, {keys: [{id, tenant, key or
	// sha256, models}]}, each entry as in keys below, except that it may
	// give the key itself (key) rather than its hash: the gateway hashes it
	// as it reads the file and keeps only the hash. The file is reread every
	// server.reload_interval, on SIGHUP and on POST /admin/reload; a file
	// that fails to read or parse keeps the keys in effect, is logged and is
	// counted in inferrail_auth_reloads_total{file="api_keys",
	// result="rejected"}. Default "": no file.
	File string `koanf:"file"`
	// Keys are keys given in the config or the environment
	// (INFERRAIL_AUTH__API_KEYS__KEYS='[{id: ci, sha256: …}]'), each by the
	// SHA-256 of the key, never the key. Default none.
	Keys []APIKey `koanf:"keys"`
}

// APIKey is one client key.
type APIKey struct {
	// ID names the key in metrics (the key label), the decision log and
	// traces: letters, digits, '.', '_' and '-'. Required, and unique across
	// the config and the key file.
	ID string `koanf:"id"`
	// Tenant is who the key belongs to; several keys may share a tenant.
	// It labels the tenant's requests in metrics, the decision log and
	// traces. Same characters as id. Default: the id.
	Tenant string `koanf:"tenant"`
	// SHA256 is the SHA-256 of the key, 64 hex digits, as
	// `printf %s "$KEY" | sha256sum` prints it. Required here; in the key
	// file, this or key. Shown as "REDACTED" on GET /admin/config.
	SHA256 string `koanf:"sha256" secret:"true"`
	// Models lists the models the key may use, by name or alias; a request
	// for another model gets 404, as OpenAI answers for a model that does
	// not exist or that the key may not use, and GET /v1/models lists only
	// these. Default none: every model.
	Models []string `koanf:"models"`
}

// AdminAuth guards the admin port. Once a token is set, or
// tls.admin_listen.client_ca_file, every admin route needs a credential,
// and a request without a good one gets 401.
type AdminAuth struct {
	// TokenFile is a file holding the admin bearer token (Authorization:
	// Bearer TOKEN), such as a mounted Kubernetes secret; surrounding
	// whitespace is ignored. Reread as api_keys.file is. Default "".
	TokenFile string `koanf:"token_file"`
	// TokenSHA256 is the SHA-256 of the admin token, 64 hex digits, to give
	// it in the config or the environment (INFERRAIL_AUTH__ADMIN__TOKEN_SHA256)
	// without the token itself. Shown as "REDACTED" on GET /admin/config.
	// Default "".
	TokenSHA256 string `koanf:"token_sha256" secret:"true"`
	// MetricsPublic leaves GET /metrics open for scrapers while the rest of
	// the admin port is guarded. An admin port that requires client
	// certificates (tls.admin_listen.client_ca_file without a token) still
	// asks scrapers for one in the handshake. Default false.
	MetricsPublic bool `koanf:"metrics_public"`
}

// PublicPathsAllowed are the client port paths auth.public_paths may name:
// the ones that touch no model.
var PublicPathsAllowed = []string{"/health", "/v1/models"}

func defaultAuth() Auth { return Auth{PublicPaths: []string{"/health"}} }

// On reports whether the client port needs API keys.
func (a *APIKeys) On() bool { return a.File != "" || len(a.Keys) > 0 }

// On reports whether the admin port needs a credential.
func (a *AdminAuth) On(t *TLS) bool {
	return a.TokenFile != "" || a.TokenSHA256 != "" || t.AdminListen.ClientCAFile != ""
}

// TLS configures TLS on the gateway's listeners and to its engines.
// Restart only; the certificate files themselves are reread when they
// change, so a rotated certificate needs no restart.
type TLS struct {
	// MinVersion is the oldest TLS version the gateway accepts and offers:
	// "1.2" or "1.3". Default "1.2".
	MinVersion string `koanf:"min_version"`
	// Listen is the client port's TLS (server.listen).
	Listen TLSListener `koanf:"listen"`
	// AdminListen is the admin port's TLS (server.admin_listen). Its
	// client_ca_file turns on mTLS: a client certificate signed by it is
	// accepted in place of auth.admin's token; without a token it is
	// required.
	AdminListen TLSListener `koanf:"admin_listen"`
	// ExtProc is the endpoint picker's ext_proc port (ext_proc.listen,
	// inferrail epp); client_ca_file requires Envoy to present a
	// certificate signed by it.
	ExtProc TLSListener `koanf:"ext_proc"`
	// Upstream is how the gateway trusts https:// replicas.
	Upstream UpstreamTLS `koanf:"upstream"`
}

// TLSListener is a listener's certificate. Both files set turn TLS on;
// neither leaves the listener plain HTTP.
type TLSListener struct {
	// CertFile is the PEM certificate chain, leaf first, as vLLM's
	// --ssl-certfile. It and key_file are checked for changes at most once a
	// second, on a new connection's handshake: connections open keep their
	// certificate, new ones get the new one. Default "".
	CertFile string `koanf:"cert_file"`
	// KeyFile is the PEM private key of cert_file, as vLLM's --ssl-keyfile.
	// Default "".
	KeyFile string `koanf:"key_file"`
	// ClientCAFile is a PEM bundle of CAs whose client certificates are
	// verified (mTLS), as vLLM's --ssl-ca-certs. On the client port a
	// certificate is then required; on the admin port it stands in for the
	// token. Needs cert_file. Default "": none asked for.
	ClientCAFile string `koanf:"client_ca_file"`
}

// On reports whether the listener serves TLS.
func (l *TLSListener) On() bool { return l.CertFile != "" }

// UpstreamTLS configures TLS to engines with https:// URLs.
type UpstreamTLS struct {
	// CAFile is a PEM bundle of the CAs engine certificates are verified
	// against, for the proxy, health checks and metrics scrapes. Default "":
	// the system's roots.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are a client certificate presented to engines
	// that ask for one (vLLM --ssl-cert-reqs 2), reread as a listener's.
	// Default "".
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

func defaultTLS() TLS { return TLS{MinVersion: "1.2"} }

// HashKey returns the hex SHA-256 of a key or token, as APIKey.SHA256 and
// AdminAuth.TokenSHA256 hold it.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func (v *validator) auth(a *Auth, t *TLS, models map[string]string) {
	ids, hashes := map[string]string{}, map[string]string{}
	for i := range a.APIKeys.Keys {
		k := &a.APIKeys.Keys[i]
		p := index("auth.api_keys.keys", i)
		v.apiKey(p, k, ids, hashes)
		if k.SHA256 == "" {
			v.add(p+".sha256", "required: the key's SHA-256, never the key (printf %%s \"$KEY\" | sha256sum)")
		}
		for j, m := range k.Models {
			if _, ok := models[m]; !ok {
				v.add(index(p+".models", j), "%q is not a configured model or alias", m)
			}
		}
	}
	for i, p := range a.PublicPaths {
		v.oneOf(index("auth.public_paths", i), p, PublicPathsAllowed...)
	}
	v.sha256("auth.admin.token_sha256", a.Admin.TokenSHA256)
	if a.Admin.TokenFile != "" && a.Admin.TokenSHA256 != "" {
		v.add("auth.admin.token_sha256", "set token_file or token_sha256, not both")
	}
	if a.Admin.MetricsPublic && !a.Admin.On(t) {
		v.add("auth.admin.metrics_public", "needs auth.admin.token_file, token_sha256 or tls.admin_listen.client_ca_file: the admin port is open")
	}
}

// apiKey checks the fields an API key has in the config and the key file
// alike; ids and hashes map what is taken to the path that took it.
func (v *validator) apiKey(p string, k *APIKey, ids, hashes map[string]string) {
	v.id(p+".id", k.ID, ids)
	if k.Tenant != "" {
		v.id(p+".tenant", k.Tenant, map[string]string{})
	}
	if v.sha256(p+".sha256", k.SHA256) && k.SHA256 != "" {
		// The hash is not named: it identifies the key.
		if prev, dup := hashes[k.SHA256]; dup {
			v.add(p+".sha256", "the same key as %s", prev)
		} else {
			hashes[k.SHA256] = p
		}
	}
}

// sha256 checks a hex SHA-256, reporting whether it is one (or empty),
// without ever printing it.
func (v *validator) sha256(key, h string) bool {
	if h == "" {
		return true
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || strings.ToLower(h) != h {
		v.add(key, "want the SHA-256 as 64 lower-case hex digits, got %d characters", len(h))
		return false
	}
	return true
}

func (v *validator) tls(t *TLS) {
	v.oneOf("tls.min_version", t.MinVersion, "1.2", "1.3")
	for _, l := range []struct {
		key string
		l   *TLSListener
	}{{"tls.listen", &t.Listen}, {"tls.admin_listen", &t.AdminListen}, {"tls.ext_proc", &t.ExtProc}} {
		if (l.l.CertFile == "") != (l.l.KeyFile == "") {
			v.add(l.key+".key_file", "cert_file and key_file go together")
		}
		if l.l.ClientCAFile != "" && l.l.CertFile == "" {
			v.add(l.key+".client_ca_file", "needs cert_file: client certificates are asked for in a TLS handshake")
		}
	}
	if (t.Upstream.CertFile == "") != (t.Upstream.KeyFile == "") {
		v.add("tls.upstream.key_file", "cert_file and key_file go together")
	}
}

// keyFile is the layout of auth.api_keys.file.
type keyFile struct {
	Keys []keyFileEntry `koanf:"keys"`
}

// keyFileEntry is an APIKey as the key file may give it: by the key or by
// its hash.
type keyFileEntry struct {
	ID     string   `koanf:"id"`
	Tenant string   `koanf:"tenant"`
	Key    string   `koanf:"key"`
	SHA256 string   `koanf:"sha256"`
	Models []string `koanf:"models"`
}

var keyFileType = reflect.TypeOf(keyFile{})

// ParseAPIKeys reads the document of an auth.api_keys.file: {keys: [...]},
// each entry an APIKey that gives its key (key) or its hash (sha256). It
// returns the keys with every key hashed and dropped, and tenants filled in,
// or every problem at once (errors.Join of *KeyError, paths such as
// "keys[2].sha256"). No error or result holds a key. inConfig are the keys
// already in the config, which the file's ids and keys must not repeat. An
// empty document holds no keys.
func ParseAPIKeys(doc []byte, inConfig []APIKey) ([]APIKey, error) {
	if len(doc) > MaxBytes*16 {
		return nil, fmt.Errorf("the key file is larger than %d bytes", MaxBytes*16)
	}
	raw, err := parseYAML(doc)
	if err != nil {
		return nil, err
	}
	top, ok := toStringMap(raw)
	if raw != nil && !ok {
		return nil, fmt.Errorf("the key file must be a mapping with a keys list, got %s", sched.Describe(raw))
	}
	var ck checker
	checked, _ := ck.value("", top, keyFileType, 0)
	for _, e := range ck.errs {
		// A key of digits is a YAML number, and the checker's complaint
		// would show it.
		if ke, ok := e.(*KeyError); ok && (strings.HasSuffix(ke.Key, ".key") || strings.HasSuffix(ke.Key, ".sha256")) {
			ke.Err = errors.New("expected a string (quote it); the value is not shown")
		}
	}
	var f keyFile
	if m, _ := checked.(map[string]any); len(m) > 0 {
		k := koanf.New(".")
		if err := k.Load(mapProvider(m), nil); err != nil {
			return nil, fmt.Errorf("BUG: config: key file: %w", err)
		}
		if err := k.UnmarshalWithConf("", &f, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
			return nil, fmt.Errorf("BUG: config: key file: %w", err)
		}
	}
	v := validator{skip: ck.covers, limit: maxProblems - len(ck.errs)}
	ids, hashes := map[string]string{}, map[string]string{}
	for i := range inConfig {
		ids[inConfig[i].ID] = index("auth.api_keys.keys", i)
		hashes[inConfig[i].SHA256] = index("auth.api_keys.keys", i)
	}
	out := make([]APIKey, 0, len(f.Keys))
	for i, e := range f.Keys {
		p := index("keys", i)
		k := APIKey{ID: e.ID, Tenant: e.Tenant, SHA256: e.SHA256, Models: e.Models}
		switch {
		case e.Key != "" && e.SHA256 != "":
			v.add(p+".key", "set key or sha256, not both")
		case e.Key != "":
			k.SHA256 = HashKey(e.Key)
		case e.SHA256 == "":
			v.add(p+".key", "required: the key, or its SHA-256 in sha256")
		}
		v.apiKey(p, &k, ids, hashes)
		if k.Tenant == "" {
			k.Tenant = k.ID
		}
		if len(k.Models) == 0 {
			k.Models = nil
		}
		out = append(out, k)
	}
	errs := append(ck.errs, v.errs...)
	if more := ck.more + v.more; more > 0 {
		errs = append(errs, moreProblems(more))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Redacted returns Map's result with every secret (API key hashes, the
// admin token's hash) replaced by "REDACTED", for GET /admin/config.
func (c *Config) Redacted() (map[string]any, error) {
	m, err := c.Map()
	if err != nil {
		return nil, err
	}
	redact(m, configType)
	return m, nil
}

// Redaction is what Redacted shows in place of a secret.
const Redaction = "REDACTED"

// redact replaces the values of fields tagged secret:"true" in v, a Map
// of type t.
func redact(v any, t reflect.Type) {
	t = deref(t)
	switch x := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return
		}
		for name, f := range fieldsOf(t) {
			val, ok := x[name]
			if !ok {
				continue
			}
			if f.Tag.Get("secret") == "true" {
				if s, _ := val.(string); s != "" {
					x[name] = Redaction
				}
				continue
			}
			redact(val, f.Type)
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return
		}
		for _, e := range x {
			redact(e, t.Elem())
		}
	}
}
