package admin

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/routing"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// oneModel explains model m, keeping the request it was asked about.
type oneModel struct{ got *policy.Request }

func (oneModel) Resolve(name string) (string, bool) { return "m", name == "m" }
func (o oneModel) Explain(_, _ string, req policy.Request, _ time.Time) (*routing.Explanation, error) {
	*o.got = req
	return nil, errors.New("explained")
}

// /admin/explain explains a request with the SLO the gateway would give
// it: its headers', else its model's default; a malformed header is a 400.
func TestExplainSLO(t *testing.T) {
	c := config.Default()
	m := config.NewModel("m")
	m.SLO = config.SLO{TTFT: 2 * time.Second, TPOT: 40 * time.Millisecond}
	c.Models = []config.Model{m}
	var got policy.Request
	s := New(noReplicas{}, telemetry.New(noReplicas{})).WithModels(configs{c}).
		WithExplain(ExplainOptions{Fleet: oneModel{&got}, Timeout: time.Second})
	explain := func(hdr ...string) (int, string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(explainPrefix + "/v1/chat/completions")
		ctx.Request.Header.SetMethod("POST")
		for i := 0; i+1 < len(hdr); i += 2 {
			ctx.Request.Header.Set(hdr[i], hdr[i+1])
		}
		ctx.Request.SetBodyString(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		s.handle(&ctx)
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	explain()
	if got.SLO != (policy.SLO{TTFT: 2 * time.Second, TPOT: 40 * time.Millisecond}) {
		t.Errorf("no header: explained with %v, want the model's default", got.SLO)
	}
	explain(flow.HeaderSLOTTFT, "300")
	if got.SLO != (policy.SLO{TTFT: 300 * time.Millisecond, TPOT: 40 * time.Millisecond}) {
		t.Errorf("a TTFT header: explained with %v", got.SLO)
	}
	if code, body := explain(flow.HeaderSLOTPOTAlias, "-1"); code != 400 || !strings.Contains(body, flow.HeaderSLOTPOTAlias) {
		t.Errorf("a malformed header: %d %s", code, body)
	}
}
