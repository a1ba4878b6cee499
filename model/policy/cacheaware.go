package policy

import "math/rand/v2"

var (
	_ Explainer = (*PrefixHash)(nil)
	_ Explainer = (*KVAware)(nil)
)

// PrefixHashParams configures prefix_hash (routing.prefix_hash).
type PrefixHashParams struct {
	// Blocks is how many leading full blocks are hashed. At most 0 takes
	// the default, 16.
	Blocks int
}

// DefaultPrefixHashParams returns routing.prefix_hash's defaults.
func DefaultPrefixHashParams() PrefixHashParams { return PrefixHashParams{Blocks: 16} }

// PrefixHash sends a prompt to the replica of highest rendezvous weight for
// its first Blocks block hashes, whatever the load: the same prefix always
// goes to the same replica while it is a candidate, and removing a
// candidate moves only the prefixes it had. A prompt with no full block
// goes by the power of two choices. It keeps no state and is safe for
// concurrent use (each caller passing its own rng).
type PrefixHash struct {
	blocks int
}

// NewPrefixHash returns a prefix_hash policy with params p.
func NewPrefixHash(p PrefixHashParams) *PrefixHash {
	if p.Blocks <= 0 {
		p.Blocks = DefaultPrefixHashParams().Blocks
	}
	return &PrefixHash{blocks: p.Blocks}
}

// Name returns "prefix_hash".
func (*PrefixHash) Name() string { return "prefix_hash" }

// Pick returns the prefix's replica. It draws one rng.Uint64().
func (p *PrefixHash) Pick(req *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		return -1, ErrNoCandidate
	}
	return p.decide(req, cands, rng.Uint64(), nil).Winner, nil
}

// Explain returns what Pick would decide with draw, changing nothing.
func (p *PrefixHash) Explain(req *Request, cands []Candidate, draw uint64) (Explanation, error) {
	ex := Explanation{Policy: p.Name(), Workings: WorkingsWeight, Decision: Decision{Winner: -1}}
	if len(cands) == 0 {
		return ex, ErrNoCandidate
	}
	ex.Cands = explainBase(cands)
	ex.Decision = p.decide(req, cands, draw, ex.Cands)
	return ex, nil
}

func (p *PrefixHash) decide(req *Request, cands []Candidate, draw uint64, ex []Explained) Decision {
	if len(req.Blocks) == 0 {
		return Decision{Winner: p2cDraw(cands, draw), Steer: SteerNoPrefix}
	}
	root := hashKey(req.Blocks[min(len(req.Blocks), p.blocks)-1])
	best, bestW := 0, uint64(0)
	for i := range cands {
		w := hrw(root, candKey(&cands[i]))
		if ex != nil {
			ex[i].Weight = w
		}
		if i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return Decision{Winner: best}
}

// KVAwareParams configures kv_aware (routing.kv_aware).
type KVAwareParams struct {
	// CacheWeight weighs the share of the prompt cached.
	CacheWeight float64
	// LoadWeight weighs requests in flight against the busiest
	// candidate's.
	LoadWeight float64
}

// DefaultKVAwareParams returns routing.kv_aware's defaults.
func DefaultKVAwareParams() KVAwareParams { return KVAwareParams{CacheWeight: 1, LoadWeight: 1} }

// KVAware picks the best
//
//	cache_weight * cached / prompt - load_weight * in_flight / busiest
//
// where busiest is the most requests in flight on any candidate (the term
// is 0 when none has any, as is the first when the prompt is empty); ties
// go to fewer in flight, then to chance. It keeps no state and is safe for
// concurrent use (each caller passing its own rng).
type KVAware struct {
	p KVAwareParams
}

// NewKVAware returns a kv_aware policy with params p.
func NewKVAware(p KVAwareParams) *KVAware { return &KVAware{p: p} }

// Name returns "kv_aware".
func (*KVAware) Name() string { return "kv_aware" }

// Pick returns the best scored candidate. It draws one rng.Uint64().
func (p *KVAware) Pick(req *Request, cands []Candidate, rng *rand.Rand) (int, error) {
	if len(cands) == 0 {
		return -1, ErrNoCandidate
	}
	return p.decide(req, cands, rng.Uint64(), nil).Winner, nil
}

// Explain returns what Pick would decide with draw, changing nothing.
func (p *KVAware) Explain(req *Request, cands []Candidate, draw uint64) (Explanation, error) {
	ex := Explanation{Policy: p.Name(), Workings: WorkingsScore, Decision: Decision{Winner: -1}}
	if len(cands) == 0 {
		return ex, ErrNoCandidate
	}
	ex.Cands = explainBase(cands)
	ex.Decision = p.decide(req, cands, draw, ex.Cands)
	return ex, nil
}

// Score returns kv_aware's score for c, given the prompt's length and the
// busiest candidate's requests in flight.
func (p *KVAware) Score(c *Candidate, prompt, busiest int) float64 {
	var s float64
	if prompt > 0 {
		s = p.p.CacheWeight * float64(min(max(c.CachedTokens, 0), prompt)) / float64(prompt)
	}
	if busiest > 0 {
		s -= p.p.LoadWeight * float64(max(c.InFlight, 0)) / float64(busiest)
	}
	return s
}

func (p *KVAware) decide(req *Request, cands []Candidate, draw uint64, ex []Explained) Decision {
	busiest := 0
	for i := range cands {
		busiest = max(busiest, cands[i].InFlight)
	}
	prompt := max(req.PromptTokens, 0)
	best, bestS := -1, 0.0
	for i := range cands {
		s := p.Score(&cands[i], prompt, busiest)
		if ex != nil {
			ex[i].Score = s
		}
		if best < 0 || s > bestS || s == bestS && fewerThenChance(cands, i, best, draw) {
			best, bestS = i, s
		}
	}
	return Decision{Winner: best}
}

// fewerThenChance reports whether candidate i beats the tied candidate j:
// fewer in flight, then by chance.
func fewerThenChance(cands []Candidate, i, j int, draw uint64) bool {
	if a, b := cands[i].InFlight, cands[j].InFlight; a != b {
		return a < b
	}
	return tieRank(draw, i) < tieRank(draw, j)
}

// explainBase returns the candidates' own fields as Explained.
func explainBase(cands []Candidate) []Explained {
	ex := make([]Explained, len(cands))
	for i := range cands {
		c := &cands[i]
		ex[i] = Explained{
			Replica:       c.Replica,
			InFlight:      c.InFlight,
			CachedTokens:  c.CachedTokens,
			PricedTokens:  c.CachedTokens,
			QueuedPrefill: c.QueuedPrefill,
			Session:       c.Session,
		}
	}
	return ex
}
