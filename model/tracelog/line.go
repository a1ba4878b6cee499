// Package tracelog is the one definition of a line of the request log
// (observability.request_log), which is also a line of a Mooncake trace:
// its JSON field names, the decoded line and its decoder. The writer
// (transport/requestlog) spells its keys with the constants here; the
// replay (sim/workload) and the strict reader of tests and tools decode
// with Decode. docs/request-log.md says what each field means.
package tracelog

import (
	"encoding/json"
	"errors"
	"slices"
)

// The field names of a line, in the order the writer writes them:
// Mooncake's four first, then the gateway's.
const (
	KeyTimestamp    = "timestamp"
	KeyInputLength  = "input_length"
	KeyOutputLength = "output_length"
	KeyHashIDs      = "hash_ids"
	KeyBlockSize    = "block_size"
	KeyTime         = "time"
	KeyModel        = "model"
	KeyAdapter      = "adapter"
	KeySession      = "session"
	KeyPolicy       = "policy"
	KeyReplica      = "replica"
	KeyStatus       = "status"
	KeyPredicted    = "predicted_cached_tokens"
	KeyCached       = "cached_tokens"
	KeyTTFT         = "ttft_ms"
	KeyE2E          = "e2e_ms"
)

// Line is a decoded line. Mooncake's four fields are always there (Decode
// fails without them); a gateway field a line may leave out is a pointer,
// nil when it is left out, so that a missing field is told from a zero.
// A Mooncake trace has none of the gateway's fields.
type Line struct {
	// Timestamp is in ms, from the first request of the file.
	Timestamp    int64
	InputLength  int
	OutputLength int
	// HashIDs is never nil; it is empty for a prompt the gateway could
	// not tokenize.
	HashIDs   []int64
	BlockSize *int
	// Time is the arrival, RFC 3339 (the request log's, not Mooncake's).
	Time              *string
	Model, Adapter    string
	Session           *string
	Policy, Replica   string
	Status            int
	Predicted, Cached *int
	TTFT, E2E         *float64 // ms
}

// ErrMissing is a required field (one of Mooncake's four) left out or
// null; ErrUnknown a field the format does not name, in a strict Decode.
var (
	ErrMissing = errors.New("missing")
	ErrUnknown = errors.New("not a field of the request log")
)

// FieldError is a field that could not be read: its value is not of the
// field's type, or it is missing, or unknown.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// field is one field's name and where Decode puts it; required tells
// whether a line must have it.
type field struct {
	key      string
	dst      any
	required bool
}

// fields lists l's fields in the format's order.
func (l *Line) fields() []field {
	return []field{
		{KeyTimestamp, &l.Timestamp, true},
		{KeyInputLength, &l.InputLength, true},
		{KeyOutputLength, &l.OutputLength, true},
		{KeyHashIDs, &l.HashIDs, true},
		{KeyBlockSize, &l.BlockSize, false},
		{KeyTime, &l.Time, false},
		{KeyModel, &l.Model, false},
		{KeyAdapter, &l.Adapter, false},
		{KeySession, &l.Session, false},
		{KeyPolicy, &l.Policy, false},
		{KeyReplica, &l.Replica, false},
		{KeyStatus, &l.Status, false},
		{KeyPredicted, &l.Predicted, false},
		{KeyCached, &l.Cached, false},
		{KeyTTFT, &l.TTFT, false},
		{KeyE2E, &l.E2E, false},
	}
}

// Decode decodes one line: a JSON object, alone on the line. A value of
// the wrong type or a missing Mooncake field fails with a *FieldError
// naming the first such field in the format's order; a null value counts
// as left out. A field the format does not name fails when strict (a
// check of the writer's output) and is skipped otherwise (a replay, which
// reads Mooncake's fields and ignores the rest). Keys match exactly.
func Decode(b []byte, strict bool) (Line, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Line{}, errors.New("a JSON " + te.Value + ", not an object")
		}
		return Line{}, err
	}
	var l Line
	fs := l.fields()
	known := 0
	var missing string
	for _, f := range fs {
		v, ok := raw[f.key]
		known += btoi(ok)
		if !ok || string(v) == "null" {
			if f.required && missing == "" {
				missing = f.key
			}
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return Line{}, &FieldError{f.key, err}
		}
	}
	if strict && known < len(raw) {
		var unknown []string
		for k := range raw {
			if !slices.ContainsFunc(fs, func(f field) bool { return f.key == k }) {
				unknown = append(unknown, k)
			}
		}
		return Line{}, &FieldError{slices.Min(unknown), ErrUnknown}
	}
	if missing != "" {
		return Line{}, &FieldError{missing, ErrMissing}
	}
	return l, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
