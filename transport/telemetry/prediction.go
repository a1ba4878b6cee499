package telemetry

import (
	"io"
	"strconv"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/model/openai"
)

// The results of inferrail_prediction_total: how the cached tokens
// predicted on the replica that served compare with those its engine
// reported (usage.prompt_tokens_details.cached_tokens). Unknown: the
// response carried no cached_tokens (no usage, an engine without
// --enable-prompt-tokens-details, an error, a stream cut short).
const (
	PredictionExact   = "exact"
	PredictionOver    = "over"
	PredictionUnder   = "under"
	PredictionUnknown = "unknown"
)

// PredictionResults lists them, in the order of the page.
var PredictionResults = [...]string{PredictionExact, PredictionOver, PredictionUnder, PredictionUnknown}

// errorBuckets bound inferrail_prediction_error_tokens, predicted − actual
// in tokens: −1 and 0 split under, exact and over, then powers of four out
// to whole long prompts either way.
var errorBuckets = []float64{-16384, -4096, -1024, -256, -64, -16, -1, 0, 16, 64, 256, 1024, 4096, 16384}

// Prediction counts, for one (replica, model), how its cache predictions
// came out: inferrail_prediction_total{model,replica,result} and the
// histogram inferrail_prediction_error_tokens{model,replica}. It also sums,
// over the predictions compared, the prompt, predicted and delivered
// cached tokens, for the hit rates /admin/replicas shows. It keeps nothing
// per request; it is safe for concurrent use.
type Prediction struct {
	results                      [len(PredictionResults)]*metrics.Counter
	errors                       *signedHistogram
	prompt, predicted, delivered atomic.Uint64
	// usages counts the responses whose usage was read, and detailed those
	// of them with prompt_tokens_details.
	usages, detailed atomic.Uint64
}

func newPrediction(set *metrics.Set, lm, lr string) *Prediction {
	p := &Prediction{errors: newSignedHistogram(`inferrail_prediction_error_tokens`, lm+`,`+lr, errorBuckets)}
	set.RegisterMetricsWriter(p.errors.write)
	for i, res := range PredictionResults {
		p.results[i] = set.NewCounter(`inferrail_prediction_total{` + lm + `,` + lr + `,result=` + strconv.Quote(res) + `}`)
	}
	return p
}

// Result classifies predicted against delivered cached tokens.
func Result(predicted, delivered int) string {
	switch {
	case predicted == delivered:
		return PredictionExact
	case predicted > delivered:
		return PredictionOver
	}
	return PredictionUnder
}

// Compare records one prediction of predicted cached tokens for a prompt of
// prompt tokens (the gateway's count) against u, the engine's usage, read
// when ok; on the model's inferrail_delivered_cached_tokens_total too.
// The gateway and the endpoint picker call it once per committed response
// of a decision the KV index priced, so that inferrail_prediction_total
// sums to the decisions counted in inferrail_predicted_cached_tokens_total.
func (p *Prediction) Compare(m *Model, prompt, predicted int, u openai.Usage, ok bool) {
	if ok {
		p.usages.Add(1)
		if u.Details {
			p.detailed.Add(1)
		}
	}
	if !ok || !u.Details {
		p.results[3].Inc()
		return
	}
	delivered := u.CachedTokens
	for i, res := range PredictionResults {
		if res == Result(predicted, delivered) {
			p.results[i].Inc()
		}
	}
	p.errors.update(predicted - delivered)
	m.DeliveredCached.Add(delivered)
	p.prompt.Add(uint64(max(prompt, 0)))
	p.predicted.Add(uint64(max(predicted, 0)))
	p.delivered.Add(uint64(delivered))
}

// Usages reports how many responses' usage was read, and how many of them
// had prompt_tokens_details: an engine that never sends them leaves every
// prediction unknown.
func (p *Prediction) Usages() (read, detailed uint64) { return p.usages.Load(), p.detailed.Load() }

// Accuracy is one replica's predictions, summed over its models.
type Accuracy struct {
	// Exact, Over, Under and Unknown count the predictions by result.
	Exact, Over, Under, Unknown uint64
	// PromptTokens, PredictedCached and DeliveredCached sum the compared
	// predictions (all but the unknown ones).
	PromptTokens, PredictedCached, DeliveredCached uint64
}

// Accuracy sums replica id's predictions over its models.
func (r *Registry) Accuracy(id string) Accuracy {
	var a Accuracy
	rep, ok := r.replicas.get(id)
	if !ok {
		return a
	}
	rep.mu.RLock()
	defer rep.mu.RUnlock()
	for _, p := range rep.preds {
		a.Exact += p.results[0].Get()
		a.Over += p.results[1].Get()
		a.Under += p.results[2].Get()
		a.Unknown += p.results[3].Get()
		a.PromptTokens += p.prompt.Load()
		a.PredictedCached += p.predicted.Load()
		a.DeliveredCached += p.delivered.Load()
	}
	return a
}

// signedHistogram is a Prometheus histogram of whole numbers of either
// sign: metrics.PrometheusHistogram drops negative values, and an error
// under the prediction is one. It is safe for concurrent use.
type signedHistogram struct {
	name, labels string
	bounds       []float64
	buckets      []atomic.Uint64 // per bound, then +Inf; not cumulative
	sum          atomic.Int64
}

func newSignedHistogram(name, labels string, bounds []float64) *signedHistogram {
	return &signedHistogram{name: name, labels: labels, bounds: bounds, buckets: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *signedHistogram) update(v int) {
	i := 0
	for i < len(h.bounds) && float64(v) > h.bounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(v))
}

// write renders the histogram's series; _count is the buckets' total, so
// the two always agree on one page.
func (h *signedHistogram) write(w io.Writer) {
	var b []byte
	var n uint64
	for i := range h.buckets {
		n += h.buckets[i].Load()
		le := "+Inf"
		if i < len(h.bounds) {
			le = strconv.FormatFloat(h.bounds[i], 'g', -1, 64)
		}
		b = append(b, h.name+`_bucket{`+h.labels+`,le="`+le+`"} `...)
		b = strconv.AppendUint(b, n, 10)
		b = append(b, '\n')
	}
	b = append(b, h.name+`_sum{`+h.labels+`} `...)
	b = strconv.AppendInt(b, h.sum.Load(), 10)
	b = append(b, "\n"+h.name+`_count{`+h.labels+`} `...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '\n')
	w.Write(b)
}
