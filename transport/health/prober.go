package health

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/inferrail/inferrail/transport/sockio"
)

// Body limits. A health answer is a few bytes; a model list is a few
// kilobytes per model.
const (
	maxHealthBytes = 64 << 10
	maxModelsBytes = 4 << 20
)

// Prober checks engines over HTTP. It satisfies fleet.Prober and is safe for
// concurrent use.
type Prober struct {
	client *http.Client
	// key returns the Authorization value for an engine's base URL, for
	// GET /v1/models (vLLM guards /v1 with --api-key, not /health); nil
	// or "" sends none.
	key func(base string) string
}

// WithTLS makes the Prober reach https:// engines with c (their CA bundle,
// a client certificate); call it before the first Probe.
func (p *Prober) WithTLS(c *tls.Config) *Prober {
	p.client.Transport.(*http.Transport).TLSClientConfig = c
	return p
}

// WithKeys makes the Prober send key(base) as the Authorization of its
// model list requests; call it before the first Probe.
func (p *Prober) WithKeys(key func(base string) string) *Prober {
	p.key = key
	return p
}

// NewProber returns a Prober with its own HTTP client: no proxy, no
// keep-alive, redirects not followed. Every probe is bounded by the context
// the caller passes (health.timeout).
func NewProber() *Prober {
	return &Prober{client: &http.Client{
		Transport: &http.Transport{
			DialContext:            sockio.Dialer(&net.Dialer{KeepAlive: -1}),
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 64 << 10,
			ResponseHeaderTimeout:  0, // the context bounds the probe
			TLSHandshakeTimeout:    10 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Probe checks the engine at base (its base URL, such as
// http://10.0.0.7:8000): GET {base}/health must answer 200 within ctx. When
// cards is true it then fetches GET {base}/v1/models and returns the objects
// of its "data" array keyed by their "id", each as the engine sent it, byte
// for byte. A model list that cannot be fetched or read does not fail the
// probe: Probe then returns nil cards and a nil error, and the caller asks
// again next time.
func (p *Prober) Probe(ctx context.Context, base string, cards bool) (map[string][]byte, error) {
	base = strings.TrimRight(base, "/")
	if _, err := p.get(ctx, base+"/health", "", maxHealthBytes); err != nil {
		return nil, err
	}
	if !cards {
		return nil, nil
	}
	key := ""
	if p.key != nil {
		key = p.key(base)
	}
	body, err := p.get(ctx, base+"/v1/models", key, maxModelsBytes)
	if err != nil {
		return nil, nil
	}
	out, err := parseModels(body)
	if err != nil {
		return nil, nil
	}
	return out, nil
}

// get fetches url, with authorization when not "", and returns its body,
// which must come with status 200 and fit in limit bytes.
func (p *Prober) get(ctx context.Context, url, authorization string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	req.Header.Set("User-Agent", "inferrail-health")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("health: GET %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("health: GET %s: status %d", url, resp.StatusCode)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("health: GET %s: body over %d bytes", url, limit)
	}
	return body, nil
}

var errNoData = errors.New(`no "data" array`)

// parseModels reads an OpenAI model list, {"object":"list","data":[...]},
// into its cards keyed by id. Entries without a string id are skipped.
func parseModels(body []byte) (map[string][]byte, error) {
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("health: model list: %w", err)
	}
	if list.Data == nil {
		return nil, fmt.Errorf("health: model list: %w", errNoData)
	}
	out := make(map[string][]byte, len(list.Data))
	for _, raw := range list.Data {
		var card struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &card) != nil || card.ID == "" {
			continue
		}
		out[card.ID] = raw // Unmarshal copied it out of body
	}
	return out, nil
}
