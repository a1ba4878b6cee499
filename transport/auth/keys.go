package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
)

// Identity is who a request authenticated as. It is immutable and shared
// by every request of its key until the keys are reloaded; a nil *Identity
// is a request on a port without API keys, and may use every model.
type Identity struct {
	// KeyID is the key's id: what metrics, the decision log and traces
	// name the key by. Never the key.
	KeyID string
	// Tenant is who the key belongs to (the key's tenant, else its id).
	Tenant string
	// models holds the configured names of the models the key may use;
	// nil allows every model.
	models map[string]struct{}
	// requests counts the key's authenticated requests:
	// inferrail_tenant_requests_total{tenant,key}.
	requests *metrics.Counter
}

// CountRequest counts one request of the key in
// inferrail_tenant_requests_total{tenant,key}; nothing for nil.
func (id *Identity) CountRequest() {
	if id != nil {
		id.requests.Inc()
	}
}

// Restricted reports whether the key may use only some models.
func (id *Identity) Restricted() bool { return id != nil && id.models != nil }

// Allows reports whether the key may use model, a configured model name
// (an alias resolved already).
func (id *Identity) Allows(model string) bool {
	if id == nil || id.models == nil {
		return true
	}
	_, ok := id.models[model]
	return ok
}

// keySet is the keys in effect: immutable once published.
type keySet struct {
	// on: the client port needs a key.
	on bool
	// public holds auth.public_paths.
	public []string
	// byPrefix maps the first eight bytes of a key's SHA-256 to the keys
	// whose hashes start so: one, but for a collision nobody can arrange.
	byPrefix map[uint64][]entry
}

type entry struct {
	sum [sha256.Size]byte
	id  *Identity
}

// newKeySet builds the keys of keys, every one's hash valid (config
// checked it), their models resolved through cfg's models and aliases.
// Counters come from set, so a key keeps its series across reloads.
func newKeySet(cfg *config.Config, keys []config.APIKey, set *metrics.Set) (*keySet, error) {
	ks := &keySet{on: cfg.Auth.APIKeys.On(), public: cfg.Auth.PublicPaths, byPrefix: make(map[uint64][]entry, len(keys))}
	for _, k := range keys {
		var e entry
		if n, err := hex.Decode(e.sum[:], []byte(k.SHA256)); err != nil || n != sha256.Size {
			return nil, fmt.Errorf("auth: key %s: bad sha256", k.ID)
		}
		tenant := k.Tenant
		if tenant == "" {
			tenant = k.ID
		}
		e.id = &Identity{KeyID: k.ID, Tenant: tenant,
			requests: set.GetOrCreateCounter(`inferrail_tenant_requests_total{tenant="` + tenant + `",key="` + k.ID + `"}`)}
		if k.Models != nil {
			e.id.models = make(map[string]struct{}, len(k.Models))
			for _, name := range k.Models {
				// A name the config does not serve (a key file written
				// for another fleet) allows nothing.
				if m, ok := cfg.Model(name); ok {
					e.id.models[m.Name] = struct{}{}
				}
			}
		}
		p := binary.LittleEndian.Uint64(e.sum[:8])
		ks.byPrefix[p] = append(ks.byPrefix[p], e)
	}
	return ks, nil
}

// lookup returns the identity of key, or nil. Its time depends on the
// SHA-256 of key alone.
func (ks *keySet) lookup(key []byte) *Identity {
	sum := sha256.Sum256(key)
	var found *Identity
	for _, e := range ks.byPrefix[binary.LittleEndian.Uint64(sum[:8])] {
		if subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 {
			found = e.id
		}
	}
	return found
}

func (ks *keySet) isPublic(path []byte) bool {
	for _, p := range ks.public {
		if p == string(path) {
			return true
		}
	}
	return false
}
