package cluster

import (
	"time"

	"github.com/inferrail/inferrail/sim/workload"
)

// arrival is one workload request as the engines see it: its prompt
// tokenized as the simulator's handler does, and the ids the simulator
// generates for it.
type arrival struct {
	at     time.Duration
	prompt []uint32
	output []uint32
	// route is the prompt as the gateway hashes it, when that is not
	// prompt (Config.KeepBillingHeader); nil otherwise.
	route   []uint32
	session uint64 // policy.Request.SessionKey, 0 for none
	class   string
}

// feed turns a workload's requests into arrivals. A prompt of token ids (a
// trace's) is taken as it is; a text prompt goes through workload.Encoder,
// which is token.RenderSimChat and token.Sim as in sim/handlers.go (the
// encoder's tests hold it to that). The output is what the simulator
// generates for that prompt (workload.AppendOutput), so a virtual run and a
// real one compute the same token ids.
type feed struct {
	src        workload.Source
	enc        *workload.Encoder
	keepHeader bool // Config.KeepBillingHeader
}

func newFeed(w workload.Workload, seed uint64, rate float64, keepHeader bool) *feed {
	return &feed{src: w.Start(seed, rate), enc: workload.NewEncoder(), keepHeader: keepHeader}
}

func (f *feed) next() arrival {
	r := f.src.Next()
	a := arrival{at: r.At, class: r.Class, session: SessionKey(r.Session)}
	if len(r.Tokens) > 0 {
		a.prompt = r.Tokens // a trace's: the Source made them for this request
	} else {
		a.prompt = f.enc.Encode(nil, &r)
	}
	a.output = workload.AppendOutput(make([]uint32, 0, r.MaxTokens), a.prompt, r.MaxTokens)
	if f.keepHeader && r.IsMessages() {
		a.route = f.enc.EncodeKeepingHeader(nil, &r)
	}
	return a
}

// SessionKey is the gateway's conversation key for an x-session-id
// (frontend.keyOf: FNV-1a, never 0), 0 for none.
func SessionKey(session string) uint64 {
	if session == "" {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(session); i++ {
		h ^= uint64(session[i])
		h *= 1099511628211
	}
	return max(h, 1)
}
