package admin

import (
	"sort"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/kvevent"
)

// indexView is the answer of GET /admin/index: the KV index of every
// replica (what its cache prediction holds, against the capacity it has)
// and, for those that follow their engine's KV events, where the stream is.
type indexView struct {
	// Entries is the blocks held by every replica's index; Capacity the
	// blocks they can hold.
	Entries  int `json:"entries"`
	Capacity int `json:"capacity_blocks"`
	// Bytes is the memory the indexes hold; BytesPerEntry that per block
	// of capacity, since an index takes its memory up front (the target
	// is at most 64).
	Bytes         int64              `json:"bytes"`
	BytesPerEntry float64            `json:"bytes_per_entry"`
	Replicas      []indexReplicaView `json:"replicas"`
}

type indexReplicaView struct {
	ID string `json:"id"`
	// Mode is exact while the index follows the engine's KV events in
	// step, else approximate (routing decisions feed it).
	Mode replica.IndexMode `json:"index_mode"`
	// Predicted is the blocks the index holds, those the prediction
	// counts as cached on the engine, of which Speculative were put there
	// by routing decisions and not yet confirmed by an event; Fill is
	// Predicted over Capacity.
	Predicted     int     `json:"predicted_blocks"`
	Speculative   int     `json:"speculative_blocks"`
	Capacity      int     `json:"capacity_blocks"`
	Fill          float64 `json:"fill"`
	Bytes         int64   `json:"bytes"`
	BytesPerEntry float64 `json:"bytes_per_entry"`
	// Events is the replica's KV event stream; null without one.
	Events *indexEventsView `json:"events"`
}

type indexEventsView struct {
	Endpoint   string `json:"endpoint"`
	EngineType string `json:"engine_type"`
	// LastSeq is the sequence number of the last batch applied and
	// LastAgeMillis how long ago it arrived; both null before the first.
	LastSeq       *uint64  `json:"last_seq"`
	LastAgeMillis *float64 `json:"last_age_ms"`
	Batches       uint64   `json:"batches"`
	Gaps          uint64   `json:"gaps"`
	// Fallbacks counts the returns to the approximate index by reason,
	// Resyncs the returns to exact after one.
	Fallbacks map[replica.FallbackReason]uint64 `json:"fallbacks"`
	Resyncs   uint64                            `json:"resyncs"`
}

// index answers GET /admin/index.
func (s *Server) index(ctx *fasthttp.RequestCtx) {
	now := time.Now()
	snaps := s.fleet.Replicas()
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].ID < snaps[j].ID })
	out := indexView{Replicas: make([]indexReplicaView, 0, len(snaps))}
	for _, r := range snaps {
		v := indexReplicaView{ID: r.ID, Mode: r.IndexMode}
		if r.Shadow != nil {
			blocks, capacity, bytes := r.Shadow.Index()
			v.Predicted, v.Capacity, v.Bytes, v.Speculative = blocks, capacity, int64(bytes), r.Shadow.Speculative()
			v.Fill, v.BytesPerEntry = ratio(float64(blocks), capacity), ratio(float64(bytes), capacity)
		}
		if es := r.Events; es.Endpoint != "" && r.EventCounts != nil {
			c := r.EventCounts
			ev := &indexEventsView{Endpoint: es.Endpoint, EngineType: string(es.Engine), Batches: c.Batches.Load(),
				Gaps: c.Gaps.Load(), Resyncs: c.Resyncs(), Fallbacks: map[replica.FallbackReason]uint64{}}
			if ev.EngineType == "" {
				ev.EngineType = string(kvevent.EngineVLLM)
			}
			if seq, at, ok := c.LastBatch(); ok {
				age := float64(now.Sub(at).Microseconds()) / 1000
				ev.LastSeq, ev.LastAgeMillis = &seq, &age
			}
			for _, reason := range replica.FallbackReasons {
				ev.Fallbacks[reason] = c.Fallbacks(reason)
			}
			v.Events = ev
		}
		out.Entries += v.Predicted
		out.Capacity += v.Capacity
		out.Bytes += v.Bytes
		out.Replicas = append(out.Replicas, v)
	}
	out.BytesPerEntry = ratio(float64(out.Bytes), out.Capacity)
	writeJSON(ctx, out)
}

func ratio(x float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return x / float64(n)
}
