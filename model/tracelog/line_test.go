package tracelog

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// docLine is the example of docs/request-log.md: every field.
const docLine = `{"timestamp":1234,"input_length":12000,"output_length":300,"hash_ids":[0,1,2,7],"block_size":512,` +
	`"time":"2026-12-07T22:40:01.123456789Z","model":"inferrail/sim-8b","adapter":"","session":"9f3a0c1e22b4d5a6",` +
	`"policy":"cost_model","replica":"r1","status":200,"predicted_cached_tokens":1024,"cached_tokens":1024,` +
	`"ttft_ms":123.4,"e2e_ms":4567.8}`

func ptr[T any](v T) *T { return &v }

// A request log's line and a Mooncake trace's decode to their values,
// strictly; the fields a Mooncake line leaves out are nil.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Line
	}{
		{docLine, Line{Timestamp: 1234, InputLength: 12000, OutputLength: 300, HashIDs: []int64{0, 1, 2, 7},
			BlockSize: ptr(512), Time: ptr("2026-12-07T22:40:01.123456789Z"), Model: "inferrail/sim-8b", Adapter: "",
			Session: ptr("9f3a0c1e22b4d5a6"), Policy: "cost_model", Replica: "r1", Status: 200,
			Predicted: ptr(1024), Cached: ptr(1024), TTFT: ptr(123.4), E2E: ptr(4567.8)}},
		// Mooncake's, with its fields in its own order.
		{`{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}`,
			Line{Timestamp: 27482, InputLength: 6955, OutputLength: 52, HashIDs: []int64{46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354}}},
		// A prompt the gateway did not tokenize, a request that failed
		// before its first byte, from before the file's first line; null
		// is left out.
		{`{"timestamp":-20,"input_length":0,"output_length":0,"hash_ids":[],"block_size":64,"session":"","status":502,"ttft_ms":null}`,
			Line{Timestamp: -20, HashIDs: []int64{}, BlockSize: ptr(64), Session: ptr(""), Status: 502}},
	} {
		for _, strict := range []bool{true, false} {
			got, err := Decode([]byte(tc.line), strict)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%.60s (strict %v): %v\n got %+v\nwant %+v", tc.line, strict, err, got, tc.want)
			}
		}
	}
}

// Bad lines fail with an error naming the field, the first in the
// format's order; a field the format does not name fails only when strict.
func TestDecodeErrors(t *testing.T) {
	const mc = `"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1]`
	for _, tc := range []struct {
		line    string
		field   string // "" for an error that is not a field's
		want    string
		lenient bool // Decode(line, false) succeeds
	}{
		{`[1,2]`, "", "a JSON array, not an object", false},
		{`"x"`, "", "a JSON string, not an object", false},
		{`{"timestamp":6`, "", "unexpected end of JSON input", false},
		{`{` + mc + `} {}`, "", "invalid character '{' after top-level value", false},
		{`null`, KeyTimestamp, "timestamp: missing", false},
		{`{}`, KeyTimestamp, "timestamp: missing", false},
		{`{"input_length":10,"output_length":1,"hash_ids":[0,1]}`, KeyTimestamp, "timestamp: missing", false},
		{`{"timestamp":5,"output_length":1,"hash_ids":[0,1]}`, KeyInputLength, "input_length: missing", false},
		{`{"timestamp":5,"input_length":10,"hash_ids":[0,1]}`, KeyOutputLength, "output_length: missing", false},
		{`{"timestamp":5,"input_length":10,"output_length":1}`, KeyHashIDs, "hash_ids: missing", false},
		{`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":null}`, KeyHashIDs, "hash_ids: missing", false},
		{`{"Timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1]}`, "Timestamp", "Timestamp: not a field", false},
		{`{"timestamp":1.5,"input_length":10,"output_length":1,"hash_ids":[0,1]}`, KeyTimestamp, "timestamp: json: cannot unmarshal number 1.5", false},
		{`{` + mc + `,"hash_ids":[0,"1"]}`, KeyHashIDs, "hash_ids: json: cannot unmarshal string", false},
		{`{"input_length":"10","hash_ids":[0,1]}`, KeyInputLength, "input_length: json: cannot unmarshal string", false},
		{`{` + mc + `,"block_size":"512"}`, KeyBlockSize, "block_size: ", false},
		{`{` + mc + `,"time":0}`, KeyTime, "time: ", false},
		{`{` + mc + `,"model":1}`, KeyModel, "model: ", false},
		{`{` + mc + `,"adapter":[]}`, KeyAdapter, "adapter: ", false},
		{`{` + mc + `,"session":7}`, KeySession, "session: ", false},
		{`{` + mc + `,"policy":{}}`, KeyPolicy, "policy: ", false},
		{`{` + mc + `,"replica":true}`, KeyReplica, "replica: ", false},
		{`{` + mc + `,"status":"200"}`, KeyStatus, "status: ", false},
		{`{` + mc + `,"predicted_cached_tokens":1.5}`, KeyPredicted, "predicted_cached_tokens: ", false},
		{`{` + mc + `,"cached_tokens":"8"}`, KeyCached, "cached_tokens: ", false},
		{`{` + mc + `,"ttft_ms":"1"}`, KeyTTFT, "ttft_ms: ", false},
		{`{` + mc + `,"e2e_ms":[1]}`, KeyE2E, "e2e_ms: ", false},
		{`{` + mc + `,"z":1,"prompt":"x"}`, "prompt", "prompt: not a field of the request log", true},
		{`{"x":1,"input_length":10}`, "x", "x: not a field", false},
	} {
		_, err := Decode([]byte(tc.line), true)
		var fe *FieldError
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || errors.As(err, &fe) != (tc.field != "") ||
			fe != nil && fe.Field != tc.field {
			t.Errorf("%s: error %v, want %q naming %q", tc.line, err, tc.want, tc.field)
		}
		if _, err := Decode([]byte(tc.line), false); (err == nil) != tc.lenient {
			t.Errorf("%s, not strict: error %v", tc.line, err)
		}
	}
	if _, err := Decode([]byte(`{"input_length":10}`), true); !errors.Is(err, ErrMissing) {
		t.Errorf("a missing field: %v is not ErrMissing", err)
	}
	if _, err := Decode([]byte(`{`+mc+`,"x":1}`), true); !errors.Is(err, ErrUnknown) {
		t.Errorf("an unknown field: %v is not ErrUnknown", err)
	}
}
