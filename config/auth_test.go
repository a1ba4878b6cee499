package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const secretKey = "sk-config-test-0123456789abcdef"

func TestAuthDefaults(t *testing.T) {
	c := mustParse(t, base)
	if !slices.Equal(c.Auth.PublicPaths, []string{"/health"}) || c.Auth.APIKeys.On() || c.Auth.Admin.On(&c.TLS) {
		t.Errorf("auth = %+v", c.Auth)
	}
	if c.TLS.MinVersion != "1.2" || c.TLS.Listen.On() || c.TLS.AdminListen.On() {
		t.Errorf("tls = %+v", c.TLS)
	}
}

// authDoc sets every auth and tls key; TestRoundTrip round-trips it.
var authDoc = base + `
auth:
  api_keys:
    file: /etc/inferrail/keys.yaml
    keys:
      - {id: ci, sha256: ` + HashKey(secretKey) + `, models: [m]}
  public_paths: []
  admin:
    token_sha256: ` + HashKey("t") + `
    metrics_public: true
tls:
  min_version: "1.3"
  listen: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}
  upstream: {ca_file: ca.pem}
`

func TestAuthValid(t *testing.T) {
	c := mustParse(t, authDoc)
	if c.Auth.PublicPaths == nil || len(c.Auth.PublicPaths) != 0 {
		t.Errorf("public_paths = %#v, want an empty list", c.Auth.PublicPaths)
	}
	if k := c.Auth.APIKeys.Keys[0]; k.ID != "ci" || k.SHA256 != HashKey(secretKey) || !c.Auth.APIKeys.On() {
		t.Errorf("keys = %+v", c.Auth.APIKeys)
	}
	// From the environment, by hash.
	c = mustParse(t, base, "INFERRAIL_AUTH__API_KEYS__KEYS=[{id: env, sha256: "+HashKey(secretKey)+"}]",
		"INFERRAIL_AUTH__ADMIN__TOKEN_SHA256="+HashKey("t"))
	if c.Auth.APIKeys.Keys[0].ID != "env" || c.Auth.Admin.TokenSHA256 != HashKey("t") {
		t.Errorf("auth from env = %+v", c.Auth)
	}
}

func TestAuthInvalid(t *testing.T) {
	f := func(doc string, want ...string) {
		t.Helper()
		_, err := Parse([]byte(base+doc), nil)
		if err == nil {
			t.Fatalf("accepted:\n%s", doc)
		}
		if got := keys(t, err); !slices.Equal(got, want) {
			t.Errorf("keys %v, want %v\n%v", got, want, err)
		}
		if strings.Contains(err.Error(), secretKey) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	h := HashKey(secretKey)
	f("auth: {api_keys: {keys: [{id: a, sha256: "+secretKey+"}]}}", "auth.api_keys.keys[0].sha256")
	f("auth: {api_keys: {keys: [{id: a, sha256: "+strings.ToUpper(h)+"}]}}", "auth.api_keys.keys[0].sha256")
	f("auth: {api_keys: {keys: [{id: a}]}}", "auth.api_keys.keys[0].sha256")
	f("auth: {api_keys: {keys: [{id: a, key: "+secretKey+"}]}}", "auth.api_keys.keys[0].key", "auth.api_keys.keys[0].sha256")
	f("auth: {api_keys: {keys: [{sha256: "+h+"}]}}", "auth.api_keys.keys[0].id")
	f("auth: {api_keys: {keys: [{id: a, sha256: "+h+"}, {id: a, sha256: "+HashKey("x")+"}]}}", "auth.api_keys.keys[1].id")
	f("auth: {api_keys: {keys: [{id: a, sha256: "+h+"}, {id: b, sha256: "+h+"}]}}", "auth.api_keys.keys[1].sha256")
	f("auth: {api_keys: {keys: [{id: a, tenant: 'a b', sha256: "+h+"}]}}", "auth.api_keys.keys[0].tenant")
	f("auth: {api_keys: {keys: [{id: a, sha256: "+h+", models: [nope]}]}}", "auth.api_keys.keys[0].models[0]")
	f("auth: {public_paths: [/v1/chat/completions]}", "auth.public_paths[0]")
	f("auth: {admin: {token_file: t, token_sha256: "+h+"}}", "auth.admin.token_sha256")
	f("auth: {admin: {metrics_public: true}}", "auth.admin.metrics_public")
	f("tls: {min_version: '1.1'}", "tls.min_version")
	f("tls: {listen: {cert_file: c.pem}}", "tls.listen.key_file")
	f("tls: {admin_listen: {client_ca_file: ca.pem}}", "tls.admin_listen.client_ca_file")
	f("tls: {upstream: {key_file: k.pem}}", "tls.upstream.key_file")
}

func TestRedacted(t *testing.T) {
	c := mustParse(t, base+`
auth:
  api_keys: {keys: [{id: ci, sha256: `+HashKey(secretKey)+`}]}
  admin: {token_sha256: `+HashKey("t")+`}
`)
	r, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(r)
	if strings.Contains(string(j), HashKey(secretKey)) || strings.Contains(string(j), HashKey("t")) ||
		strings.Count(string(j), strconv.Quote(Redaction)) != 2 || !strings.Contains(string(j), `"id":"ci"`) {
		t.Errorf("redacted: %s", j)
	}
	// Map is untouched: it is what a patch applies to.
	m, _ := c.Map()
	if j, _ := json.Marshal(m); !strings.Contains(string(j), HashKey(secretKey)) {
		t.Errorf("Map lost the hash: %s", j)
	}
}

func TestAuthLiveTLSRestart(t *testing.T) {
	prev := mustParse(t, base)
	next := mustParse(t, base+"auth: {api_keys: {file: keys.yaml}, public_paths: []}\n")
	if d := Diff(prev, next); !slices.Equal(d, []string{"auth"}) {
		t.Errorf("Diff = %v", d)
	}
	if ro := RestartOnly(prev, next); len(ro) > 0 {
		t.Errorf("auth needs a restart: %v", ro)
	}
	next = mustParse(t, base+"tls: {listen: {cert_file: c, key_file: k}}\n")
	if ro := RestartOnly(prev, next); !slices.Equal(ro, []string{"tls"}) {
		t.Errorf("RestartOnly = %v", ro)
	}
}

func TestParseAPIKeys(t *testing.T) {
	got, err := ParseAPIKeys([]byte(`keys:
  - id: a
    key: `+secretKey+`
    models: [m]
  - id: b
    tenant: team
    sha256: `+HashKey("other")+`
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []APIKey{{ID: "a", Tenant: "a", SHA256: HashKey(secretKey), Models: []string{"m"}},
		{ID: "b", Tenant: "team", SHA256: HashKey("other")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := ParseAPIKeys(nil, nil); err != nil || len(got) != 0 {
		t.Errorf("empty file: %v, %v", got, err)
	}

	inConfig := []APIKey{{ID: "c", SHA256: HashKey(secretKey)}}
	f := func(doc string, want ...string) {
		t.Helper()
		_, err := ParseAPIKeys([]byte(doc), inConfig)
		if err == nil {
			t.Fatalf("accepted:\n%s", doc)
		}
		if got := keys(t, err); !slices.Equal(got, want) {
			t.Errorf("keys %v, want %v\n%v", got, want, err)
		}
		for _, s := range []string{secretKey, "123456789012345", "sk-other-key-0000"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error shows a key: %v", err)
			}
		}
	}
	f("keys: [{id: a, key: "+secretKey+"}]", "keys[0].sha256") // the config's key again
	f("keys: [{id: c, key: sk-other-key-0000}]", "keys[0].id") // the config's id again
	f("keys: [{id: a, key: sk-other-key-0000, sha256: "+HashKey("x")+"}]", "keys[0].key")
	f("keys: [{id: a}]", "keys[0].key")
	f("keys: [{id: a, key: 123456789012345}]", "keys[0].key")
	f("keys: [{id: a, kee: sk-other-key-0000}]", "keys[0].kee", "keys[0].key")
	f("keys: [{id: 'a b', key: sk-other-key-0000}]", "keys[0].id")
	f("kees: []", "kees")
	if _, err := ParseAPIKeys([]byte("[1, 2]"), nil); err == nil {
		t.Error("a list accepted")
	}
}

// FuzzParseAPIKeys checks the key file parser on any document, and that
// no problem it reports shows a key given in a well-formed entry.
func FuzzParseAPIKeys(f *testing.F) {
	f.Add("keys: [{id: a, key: sk-0123456789}]", "sk-0123456789", "a")
	f.Add("keys: [{id: a, sha256: "+HashKey("x")+"}]", "0123456789abcdef", "b b")
	f.Add("keys:\n  - id: a\n    key: &k sk-aaaaaaaaaaaa\n  - id: b\n    key: *k\n", "sk-aaaaaaaaaaaa", "c")
	f.Add("{", "12345678901234", "")
	f.Fuzz(func(t *testing.T, doc, key, id string) {
		ParseAPIKeys([]byte(doc), nil)
		if len(key) < 12 || strings.ContainsAny(key, "\n\r\"\\") || strings.Contains(id+"keys[0].sha256 id key tenant models", key) {
			return
		}
		entry := fmt.Sprintf("keys:\n  - id: %q\n    key: %q\n  - id: %q\n    key: %q\n", id, key, id, key)
		got, err := ParseAPIKeys([]byte(entry), nil)
		if err != nil && strings.Contains(err.Error(), key) {
			t.Fatalf("the error shows the key: %v", err)
		}
		for _, k := range got {
			if k.SHA256 != HashKey(key) || k.Tenant == "" || strings.Contains(fmt.Sprint(k), key) {
				t.Fatalf("key %+v", k)
			}
		}
	})
}
