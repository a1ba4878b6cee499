package sched

import (
	"time"
)

// Session affinity, as llm-d's session-affinity-filter (a hard pin) and
// session-affinity-scorer (a soft preference), which take the same
// parameters. Under the encoded_endpoint_header strategy the client echoes
// a header naming the replica that served its last request; the front end
// decodes it and marks that candidate (policy.Candidate.Session). Under
// session_id the plugin binds each conversation (policy.Request.SessionKey,
// from x-session-id or else the body's user field) to the replica its
// last request went to, for evictionTtlSeconds.

const (
	strategyEncoded   = "encoded_endpoint_header"
	strategySessionID = "session_id"
	// sessionHeader is the one session source Inferrail reads: the front
	// end keys a conversation by x-session-id, else the body's user field.
	sessionHeader = "x-session-id"
	// sessionSlotBits sizes a session_id binding table, 2^14 slots;
	// conversations that collide in it forget their replica, which only
	// costs affinity.
	sessionSlotBits = 14
)

var sessionParams = []Param{
	{Name: "strategy", Default: strategyEncoded, Doc: "encoded_endpoint_header (the client echoes the replica's token) or session_id (the gateway binds the conversation)."},
	{Name: "profileName", Default: "", Doc: "The profile whose pick binds the session under P/D; empty is the primary profile."},
	{Name: "encodedEndpointHeaderConfig", Doc: "For encoded_endpoint_header.", Fields: []Param{
		{Name: "header", Default: "x-session-token", Doc: "The header carrying the replica's token."},
	}},
	{Name: "sessionIdConfig", Doc: "For session_id.", Fields: []Param{
		{Name: "sources", Default: []any{map[string]any{"header": sessionHeader}},
			Doc: "Where the conversation is named; Inferrail reads x-session-id (else the body's user field), so only `header: x-session-id` is accepted.",
			Elem: []Param{
				{Name: "header", Default: "", Doc: "A request header."},
				{Name: "attribute", Default: "", Doc: "A request attribute; refused (Inferrail has none)."},
			}},
		{Name: "evictionTtlSeconds", Default: 300.0, Doc: "Seconds a binding lasts unused."},
		{Name: "evictionSweepSeconds", Default: 10.0, Doc: "How often llm-d sweeps expired bindings; accepted, since here a binding expires when it is next read."},
	}},
}

var sessionAffinityFilter = Type{
	Name: "session-affinity-filter", Kind: KindFilter,
	Doc: "Keeps only the replica of the request's conversation when it is a candidate; otherwise " +
		"keeps every replica. Never leaves none.",
	Params: sessionParams,
	New:    func(f *Fields) any { return &sessionFilter{newSession(f)} },
}

var sessionAffinityScorer = Type{
	Name: "session-affinity-scorer", Kind: KindScorer,
	Doc:    "Scores the replica of the request's conversation 1, every other 0.",
	Params: sessionParams,
	New:    func(f *Fields) any { return &sessionScorer{newSession(f)} },
}

// session is what the filter and the scorer share: which candidates are
// the conversation's replica, and the bindings under session_id.
type session struct {
	byID bool
	// header names the encoded_endpoint_header header, which the front end
	// reads.
	header string
	ttl    time.Duration
	table  []binding
}

type binding struct {
	session, key uint64
	seen         time.Time
}

func newSession(f *Fields) *session {
	s := &session{}
	switch st := f.String("strategy"); st {
	case strategyEncoded:
	case strategySessionID:
		s.byID = true
	default:
		f.Fail("strategy", "want %s or %s, got %q", strategyEncoded, strategySessionID, st)
	}
	f.String("profileName")
	s.header = f.Object("encodedEndpointHeaderConfig").String("header")
	id := f.Object("sessionIdConfig")
	for _, src := range id.List("sources") {
		h, a := src.String("header"), src.String("attribute")
		switch {
		case a != "":
			src.Fail("attribute", "not supported: Inferrail names a conversation by x-session-id, else the body's user field")
		case h != sessionHeader:
			src.Fail("header", "want %s: Inferrail names a conversation by x-session-id, else the body's user field", sessionHeader)
		}
	}
	ttl := id.Float("evictionTtlSeconds")
	if !(ttl > 0) {
		id.Fail("evictionTtlSeconds", "want more than 0, got %v", ttl)
	}
	if sweep := id.Float("evictionSweepSeconds"); !(sweep > 0) {
		id.Fail("evictionSweepSeconds", "want more than 0, got %v", sweep)
	}
	s.ttl = seconds(ttl)
	if s.byID {
		s.table = make([]binding, 1<<sessionSlotBits)
	}
	return s
}

// slot is the binding slot of a conversation (Fibonacci hashing).
func (s *session) slot(session uint64) *binding {
	return &s.table[(session*0x9e3779b97f4a7c15)>>(64-sessionSlotBits)]
}

// bound reports whether candidate i is the replica of c's conversation.
func (s *session) bound(c *Cycle, i int) bool {
	if !s.byID {
		return c.Cands[i].Session
	}
	id := c.Req.SessionKey
	if id == 0 {
		return false
	}
	b := s.slot(id)
	return b.session == id && c.Req.Now.Sub(b.seen) <= s.ttl && b.key == replicaKey(&c.Cands[i])
}

// Picked binds the conversation to the replica it went to.
func (s *session) Picked(c *Cycle, winner int) {
	if id := c.Req.SessionKey; s.byID && id != 0 {
		*s.slot(id) = binding{session: id, key: replicaKey(&c.Cands[winner]), seen: c.Req.Now}
	}
}

type sessionFilter struct{ *session }

func (s *sessionFilter) Filter(c *Cycle, in, out []int) []int {
	for _, i := range in {
		if s.bound(c, i) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return append(out, in...)
	}
	return out
}

type sessionScorer struct{ *session }

func (s *sessionScorer) Score(c *Cycle, in []int, scores []float64) {
	for k, i := range in {
		if s.bound(c, i) {
			scores[k] = 1
		}
	}
}
