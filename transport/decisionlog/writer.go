// Package decisionlog writes the gateway's sampled routing decisions as JSON
// lines (observability.decision_log): for each sampled request, one line per
// routing decision, that is per attempt, with the prompt's size, the
// replica chosen, what steered the policy and what its guards set aside,
// and every replica's state, load, queued prefill and predicted cache as
// the policy saw it. Prompts are never logged.
//
// Requests are sampled by their id, so that all attempts of a request are
// kept or left out together. A goroutine drains a bounded queue to the
// file; when the disk falls behind, records are dropped and counted, and
// the request is never made to wait.
package decisionlog

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/transport/jsonl"
)

// Record is one line of the log.
type Record struct {
	Time         string `json:"time"` // RFC 3339 with nanoseconds, UTC
	RequestID    string `json:"request_id"`
	Model        string `json:"model"`
	Attempt      int    `json:"attempt"` // 1 for the first, 2 for the first retry...
	PromptTokens int    `json:"prompt_tokens"`
	Blocks       int    `json:"blocks"`
	Tokenized    bool   `json:"tokenized"`
	// Tenant and KeyID are the API key's tenant and id (never the key);
	// left out without API keys.
	Tenant string `json:"tenant,omitempty"`
	KeyID  string `json:"key_id,omitempty"`
	// PredictedCachedTokens and EstimatedTTFT are the winner's, when the
	// policy priced replicas on the KV index.
	PredictedCachedTokens *int     `json:"predicted_cached_tokens"`
	EstimatedTTFT         *float64 `json:"estimated_ttft_secs"`
	Decision
}

// QueueLen is how many records may wait for the disk.
const QueueLen = 4096

// Writer appends records to a file from its own goroutine. Its methods are
// safe for concurrent use.
type Writer struct {
	rate   float64
	lines  *jsonl.Writer // nil: memory only (Memory)
	recent recent
}

// Open opens (creating, or appending to) the file at path and starts the
// writer. rate is observability.decision_log.sample_rate, in [0, 1]. Its
// counters, inferrail_decision_log_records_total{result="written",
// "dropped" or "failed"}, go into set.
func Open(path string, rate float64, set *metrics.Set) (*Writer, error) {
	if !(rate >= 0 && rate <= 1) {
		return nil, fmt.Errorf("decision log: sample rate %v is not in [0, 1]", rate)
	}
	lines, err := jsonl.Open(path, QueueLen, "inferrail_decision_log_records_total", set)
	if err != nil {
		return nil, fmt.Errorf("observability.decision_log.path: %w", err)
	}
	return &Writer{rate: rate, lines: lines}, nil
}

// Sampled reports whether the request with this id is logged. With a file,
// the same id always gets the same answer, and ids are sampled at the
// configured rate; a memory-only Writer (Memory) samples one request per
// quarter second. A nil Writer samples nothing.
func (w *Writer) Sampled(requestID string) bool {
	if w == nil {
		return false
	}
	if w.lines == nil {
		return w.recent.due(time.Now())
	}
	return w.toFile(requestID)
}

// toFile reports whether the request with this id goes to the file.
func (w *Writer) toFile(requestID string) bool {
	if w.lines == nil || w.rate <= 0 {
		return false
	}
	if w.rate >= 1 {
		return true
	}
	// The top 53 bits of the id's hash, as a fraction in [0, 1).
	u := float64(xxh3.HashString(requestID)>>11) / (1 << 53)
	return u < w.rate
}

// Log queues r for writing, or drops and counts it when the queue is full.
// It never blocks on the disk. Records logged after Close are dropped.
func (w *Writer) Log(r *Record) {
	if r.Time == "" {
		r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	w.recent.add(r)
	if w.toFile(r.RequestID) {
		w.lines.Log(r)
	}
}

// Close stops the writer once every record queued before it is written,
// and closes the file. It returns the first write error, if any.
func (w *Writer) Close() error {
	if w == nil || w.lines == nil {
		return nil
	}
	return w.lines.Close()
}
