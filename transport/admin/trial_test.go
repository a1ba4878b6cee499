package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/shadow"
	"github.com/inferrail/inferrail/transport/telemetry"
)

type noReplicas struct{}

func (noReplicas) Replicas() []*replica.Snapshot { return nil }

type reports []shadow.Report

func (r reports) Trials() []shadow.Report { return r }

func get(s *Server, path string) (int, []byte) {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(path)
	ctx.Request.Header.SetMethod("GET")
	s.handle(&ctx)
	return ctx.Response.StatusCode(), ctx.Response.Body()
}

// /admin/shadow lists every model's shadows with their shares and mean
// gain in seconds, and an empty list when no model has any; without
// WithTrials the route does not exist.
func TestShadowRoute(t *testing.T) {
	if code, _ := get(New(noReplicas{}, telemetry.New(nil)), "/admin/shadow"); code != 404 {
		t.Fatalf("without WithTrials: %d", code)
	}
	s := New(noReplicas{}, telemetry.New(nil)).WithTrials(reports(nil))
	code, b := get(s, "/admin/shadow")
	var page shadowsView
	if err := json.Unmarshal(b, &page); code != 200 || err != nil || page.Models == nil || len(page.Models) != 0 || page.Caveat != shadow.Caveat {
		t.Fatalf("no shadows: %d %v %s", code, err, b)
	}
	s = New(noReplicas{}, telemetry.New(nil)).WithTrials(reports{{Model: "m", Dropped: 3, Shadows: []shadow.Summary{
		{Policy: "cost_model", Decisions: 10, Agreement: 0.5, Faster: 0.4, Slower: 0.1, MeanGain: 25 * time.Millisecond}}}})
	code, b = get(s, "/admin/shadow")
	page = shadowsView{}
	if err := json.Unmarshal(b, &page); code != 200 || err != nil || len(page.Models) != 1 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	want := shadowModelView{Model: "m", Dropped: 3, Shadows: []shadowPolicyView{{Policy: "cost_model", Decisions: 10, Agreement: 0.5, Faster: 0.4, Slower: 0.1, MeanGain: 0.025}}}
	if got := page.Models[0]; got.Model != want.Model || got.Dropped != want.Dropped || len(got.Shadows) != 1 || got.Shadows[0] != want.Shadows[0] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
