package workload

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/model/tracelog"
)

const mooncakeSlice = "testdata/mooncake_first300.jsonl"

// mooncakeLines reads the slice's lines as the test's own JSON decoding
// sees them, to check the reader against.
func mooncakeLines(t testing.TB) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(mooncakeSlice)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestTraceMooncake(t *testing.T) {
	tr, err := LoadTrace(mooncakeSlice, TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines := mooncakeLines(t)
	if tr.Len() != len(lines) || tr.Len() != 300 {
		t.Fatalf("Len %d, file has %d lines", tr.Len(), len(lines))
	}
	last := time.Duration(lines[len(lines)-1]["timestamp"].(float64)) * time.Millisecond
	if tr.Duration() != last {
		t.Errorf("Duration %v, want %v", tr.Duration(), last)
	}
	if want := 300 / last.Seconds(); math.Abs(tr.Rate()-want) > 1e-9 {
		t.Errorf("Rate %v, want %v", tr.Rate(), want)
	}
	if tr.Logged() {
		t.Error("a Mooncake trace reports measured TTFTs")
	}
	for i, r := range tr.Records() {
		m := lines[i]
		if r.InputLength != int(m["input_length"].(float64)) || r.OutputLength != int(m["output_length"].(float64)) ||
			r.At != time.Duration(m["timestamp"].(float64))*time.Millisecond || len(r.HashIDs) != len(m["hash_ids"].([]any)) ||
			r.BlockSize != 512 || r.Session == "" {
			t.Fatalf("record %d = %+v, line %v", i, r, m)
		}
	}
	// In 102 s few conversations get a second turn, and none a tenth; a
	// prefix shared by most prompts (id 0) does not make them one.
	per := map[string]int{}
	for _, r := range tr.Records() {
		per[r.Session]++
	}
	if most := slices.Max(slices.Collect(maps.Values(per))); len(per) < 200 || most > 10 {
		t.Errorf("%d sessions inferred, the largest of %d requests", len(per), most)
	}
	d := tr.Describe()
	for _, s := range []string{mooncakeSlice, "300 of 300", "block size 512", "speed 1", "inferred"} {
		if !strings.Contains(d, s) {
			t.Errorf("Describe %q lacks %q", d, s)
		}
	}
}

// Requests are completions of exactly input_length token ids, in the
// simulator's range, that share exactly the blocks their ids share.
func TestTraceRequests(t *testing.T) {
	tr, err := LoadTrace(mooncakeSlice, TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := take(t, tr, 1, 0, tr.Len())
	recs := tr.Records()
	block := map[int64][]uint32{} // a whole block's tokens, by id
	for i, r := range reqs {
		rec := recs[i]
		if r.Prompt != "" || r.Chat() || r.IsMessages() || len(r.Tokens) != rec.InputLength ||
			r.MaxTokens != max(rec.OutputLength, 1) || r.Class != "trace" || r.Session != rec.Session || r.At != rec.At {
			t.Fatalf("request %d: %d tokens, max %d, class %q, at %v; record %+v", i, len(r.Tokens), r.MaxTokens, r.Class, r.At, rec)
		}
		for _, id := range r.Tokens {
			if id < token.FirstID || id >= token.VocabSize {
				t.Fatalf("request %d: token id %d outside [%d, %d)", i, id, token.FirstID, token.VocabSize)
			}
		}
		for j, id := range rec.HashIDs {
			got := r.Tokens[j*512 : min((j+1)*512, len(r.Tokens))]
			if w, ok := block[id]; ok && !slices.Equal(got, w[:len(got)]) {
				t.Fatalf("request %d: block %d (id %d) differs from its earlier tokens", i, j, id)
			}
			if len(got) == 512 {
				block[id] = got
			}
		}
	}
	if !slices.Equal(reqs[0].Tokens[:512], reqs[1].Tokens[:512]) || slices.Equal(reqs[0].Tokens[512:1024], reqs[1].Tokens[512:1024]) {
		t.Error("the first two requests share id 0 only, but their tokens do not say so")
	}
	if !slices.Equal(NewEncoder().Encode(nil, &reqs[0]), reqs[0].Tokens) {
		t.Error("Encode changes a prompt of token ids")
	}
}

func TestTraceReplayRate(t *testing.T) {
	tr, err := LoadTrace(mooncakeSlice, TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := tr.Len()
	own := take(t, tr, 1, tr.Rate(), 2*n+5)
	twice := take(t, tr, 1, 2*tr.Rate(), n)
	for i, r := range tr.Records() {
		if d := own[i].At - r.At; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("request %d at its own rate: %v, want %v", i, own[i].At, r.At)
		}
		if d := twice[i].At - r.At/2; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("request %d at twice its rate: %v, want %v", i, twice[i].At, r.At/2)
		}
	}
	// Past the end it goes on, later and later.
	for i := n; i < len(own); i++ {
		if own[i].At < tr.Duration() || len(own[i].Tokens) != len(own[i-n].Tokens) {
			t.Fatalf("request %d past the end: at %v, %d tokens", i, own[i].At, len(own[i].Tokens))
		}
	}
	if own[2*n].At <= own[n].At {
		t.Fatalf("the second repeat starts at %v, the first at %v", own[2*n].At, own[n].At)
	}
	// No rate, however small, overflows the clock.
	if r := take(t, tr, 1, 1e-300, 12); r[11].At <= 0 || r[10].At != r[11].At {
		t.Errorf("a tiny rate: the 11th and 12th requests (3 s on the trace's clock) at %v and %v", r[10].At, r[11].At)
	}
	// End bounds one replay at any rate: the last request is due before
	// it, the first repeated one not.
	for _, rate := range []float64{0, tr.Rate(), 2 * tr.Rate(), 0.3} {
		reqs := take(t, tr, 1, rate, n+1)
		if end := tr.End(rate); reqs[n-1].At >= end || reqs[n].At < end {
			t.Errorf("rate %v: End %v, the last request at %v, the first repeated at %v", rate, end, reqs[n-1].At, reqs[n].At)
		}
	}
}

func TestTraceSpec(t *testing.T) {
	tr, err := LoadTrace(mooncakeSlice, TraceOptions{Limit: 10, Speed: 2})
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, r := range tr.Records() {
		longest = max(longest, r.InputLength+r.OutputLength)
	}
	if tr.Longest() != longest {
		t.Errorf("Longest %d, want %d", tr.Longest(), longest)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		File, SHA256 string
		Requests     int
		Options      TraceOptions
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(mooncakeSlice)
	if spec.File != "mooncake_first300.jsonl" || spec.SHA256 != fmt.Sprintf("%x", sha256.Sum256(raw)) || spec.Requests != 10 ||
		spec.Options.Limit != 10 || spec.Options.Speed != 2 || spec.Options.BlockSize != 512 {
		t.Errorf("the trace marshals as %s", b)
	}
}

func trace(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func read(t *testing.T, text string, o TraceOptions) *Trace {
	t.Helper()
	tr, err := ReadTrace(strings.NewReader(text), "x.jsonl", o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A conversation's turns resend the one before; the sessions inferred
// follow the longest earlier prompt of whole blocks each one extends.
func TestTraceInferredSessions(t *testing.T) {
	tr := read(t, trace(
		`{"timestamp":0,"input_length":20,"output_length":1,"hash_ids":[0,1,2]}`,           // s0: whole [0 1]
		`{"timestamp":1,"input_length":20,"output_length":1,"hash_ids":[0,3,4]}`,           // s1: [0 3]
		`{"timestamp":2,"input_length":35,"output_length":1,"hash_ids":[0,1,5,6,7]}`,       // extends s0
		`{"timestamp":3,"input_length":5,"output_length":1,"hash_ids":[0]}`,                // no whole block
		`{"timestamp":4,"input_length":16,"output_length":1,"hash_ids":[0,3]}`,             // equals s1's
		`{"timestamp":5,"input_length":24,"output_length":1,"hash_ids":[8,9,10]}`,          // new
		`{"timestamp":6,"input_length":50,"output_length":1,"hash_ids":[0,1,5,6,7,11,12]}`, // extends line 3, s0
		`{"timestamp":7,"input_length":8,"output_length":1,"hash_ids":[0]}`,                // new, but only a shared prefix
		`{"timestamp":8,"input_length":24,"output_length":1,"hash_ids":[0,13,14]}`,         // so this extends nothing
		`{"timestamp":9,"input_length":31,"output_length":1,"hash_ids":[0,13,14,15]}`,      // s8
	), TraceOptions{BlockSize: 8})
	var got []string
	for _, r := range tr.Records() {
		got = append(got, r.Session)
	}
	want := []string{"s0", "s1", "s0", "s3", "s1", "s5", "s0", "s7", "s8", "s8"}
	if !slices.Equal(got, want) {
		t.Fatalf("sessions %v, want %v", got, want)
	}
}

func TestTraceOptions(t *testing.T) {
	var lines []string
	for i := range 400 {
		// 40 sessions of 10 turns, each turn extending the one before.
		s, turn := i%40, i/40
		ids := []string{}
		for k := range turn + 1 {
			ids = append(ids, fmt.Sprint(1000*s+k))
		}
		lines = append(lines, fmt.Sprintf(`{"timestamp":%d,"input_length":%d,"output_length":%d,"hash_ids":[%s]}`,
			100*i, 4*(turn+1), i%3, strings.Join(ids, ",")))
	}
	text := trace(lines...)
	all := read(t, text, TraceOptions{BlockSize: 4})
	if all.Len() != 400 || math.Abs(all.Rate()-400/39.9) > 1e-9 {
		t.Fatalf("Len %d, Rate %v", all.Len(), all.Rate())
	}

	w := read(t, text, TraceOptions{BlockSize: 4, From: 1050 * time.Millisecond, To: 2 * time.Second, Speed: 2})
	if w.Len() != 9 || w.Records()[0].At != 0 || w.Duration() != 400*time.Millisecond || w.Records()[0].InputLength != 4*1 {
		t.Fatalf("window and speed: %d kept over %v, first %+v", w.Len(), w.Duration(), w.Records()[0])
	}

	// Sessions are kept or dropped whole, about the share asked.
	ss := read(t, text, TraceOptions{BlockSize: 4, SampleSessions: 0.5, Seed: 7})
	per := map[string]int{}
	for _, r := range ss.Records() {
		per[r.Session]++
	}
	for s, n := range per {
		if n != 10 {
			t.Fatalf("session %s kept %d of its 10 turns", s, n)
		}
	}
	if len(per) < 10 || len(per) > 30 {
		t.Fatalf("half the sessions kept %d of 40", len(per))
	}
	other := read(t, text, TraceOptions{BlockSize: 4, SampleSessions: 0.5, Seed: 8})
	if reflect.DeepEqual(other.Records(), ss.Records()) {
		t.Error("another seed samples the same sessions")
	}
	if again := read(t, text, TraceOptions{BlockSize: 4, SampleSessions: 0.5, Seed: 7}); !reflect.DeepEqual(again.Records(), ss.Records()) {
		t.Error("the same seed samples other sessions")
	}

	rs := read(t, text, TraceOptions{BlockSize: 4, SampleRequests: 0.25, Seed: 7, Limit: 50})
	if rs.Len() != 50 {
		t.Fatalf("a quarter of 400 limited to 50 kept %d", rs.Len())
	}
	q := read(t, text, TraceOptions{BlockSize: 4, SampleRequests: 0.25, Seed: 7})
	if q.Len() < 60 || q.Len() > 140 || !reflect.DeepEqual(q.Records()[:50], rs.Records()) {
		t.Fatalf("a quarter of 400 kept %d", q.Len())
	}
	if d := q.Describe(); !strings.Contains(d, fmt.Sprintf("%d of 400", q.Len())) || !strings.Contains(d, "requests sampled 0.25") {
		t.Errorf("Describe: %s", d)
	}
}

func TestTraceRequestLog(t *testing.T) {
	line := `{"timestamp":0,"input_length":1000,"output_length":300,"hash_ids":[0,1],"block_size":512,` +
		`"time":"2026-12-07T22:40:01.123456789Z","model":"inferrail/sim-8b","adapter":"a1","session":"9f3a0c1e22b4d5a6",` +
		`"policy":"cost_model","replica":"r1","status":200,"predicted_cached_tokens":512,"cached_tokens":496,` +
		`"ttft_ms":123.5,"e2e_ms":4567.25}`
	tr := read(t, trace(line,
		`{"timestamp":7,"input_length":0,"output_length":0,"hash_ids":[],"block_size":512,"session":"","status":503}`,
		`{"timestamp":9,"input_length":600,"output_length":3,"hash_ids":[0,2],"block_size":512,"session":"","status":200,"ttft_ms":1}`),
		TraceOptions{BlockSize: 64})
	want := TraceRecord{At: 0, InputLength: 1000, OutputLength: 300, HashIDs: []int64{0, 1}, BlockSize: 512,
		Session: "9f3a0c1e22b4d5a6", Model: "inferrail/sim-8b", Adapter: "a1", Policy: "cost_model", Replica: "r1", Status: 200,
		PredictedCached: 512, Cached: 496, HasPredicted: true, HasCached: true,
		TTFT: 123500 * time.Microsecond, E2E: 4567250 * time.Microsecond, Measured: true}
	if tr.Len() != 2 || !reflect.DeepEqual(tr.Records()[0], want) {
		t.Fatalf("got %d records, first %+v\nwant %+v", tr.Len(), tr.Records()[0], want)
	}
	if r := tr.Records()[1]; r.Session != "" || r.HasCached || r.At != 9*time.Millisecond {
		t.Fatalf("second kept record %+v: a log's empty session stays empty", r)
	}
	if !tr.Logged() || !strings.Contains(tr.Describe(), "2 of 3 requests kept (1 without hash ids left out)") ||
		strings.Contains(tr.Describe(), "inferred") {
		t.Fatalf("Logged %v, Describe %s", tr.Logged(), tr.Describe())
	}
}

// TestTraceRequestLogOrder: the request log writes a line when its request
// ends, so a log's timestamps come out of order and one that began before
// the file's first line is negative; the trace replays them in arrival
// order from 0. A Mooncake file (no time field) must still be in order.
func TestTraceRequestLogOrder(t *testing.T) {
	logLine := func(ts int, ids string) string {
		return `{"timestamp":` + strconv.Itoa(ts) + `,"input_length":600,"output_length":3,"hash_ids":` + ids +
			`,"block_size":512,"time":"2026-12-07T22:40:01Z","session":"","status":200,"ttft_ms":1}`
	}
	tr := read(t, trace(logLine(0, "[0,1]"), logLine(-40, "[0,2]"), logLine(25, "[3,4]"), logLine(10, "[0,5]")), TraceOptions{})
	var got []time.Duration
	var first []int64
	for _, r := range tr.Records() {
		got = append(got, r.At)
		first = append(first, r.HashIDs[1])
	}
	if want := []time.Duration{0, 40 * time.Millisecond, 50 * time.Millisecond, 65 * time.Millisecond}; !reflect.DeepEqual(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	if want := []int64{2, 1, 5, 4}; !reflect.DeepEqual(first, want) {
		t.Fatalf("second ids in replay order %v, want %v", first, want)
	}
	_, err := ReadTrace(strings.NewReader(trace(
		`{"timestamp":5,"input_length":600,"output_length":3,"hash_ids":[0,1]}`,
		`{"timestamp":4,"input_length":600,"output_length":3,"hash_ids":[0,2]}`)), "m.jsonl", TraceOptions{})
	if err == nil || !strings.Contains(err.Error(), "m.jsonl: line 2: timestamp") {
		t.Fatalf("a Mooncake file going back in time: %v", err)
	}
}

func TestTraceErrors(t *testing.T) {
	ok := `{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1]}`
	for _, tc := range []struct {
		text string
		o    TraceOptions
		want string
	}{
		{"", TraceOptions{}, "x.jsonl: no requests"},
		{"\n\n", TraceOptions{}, "no requests"},
		{trace(ok, `[1,2]`), TraceOptions{BlockSize: 8}, "line 2: not a JSON object"},
		{trace(ok, `{"timestamp":6`), TraceOptions{BlockSize: 8}, "line 2: not a JSON object"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1]} {}`), TraceOptions{BlockSize: 8}, "line 1: not a JSON"},
		{trace(`{"input_length":10,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: timestamp: missing"},
		{trace(`{"timestamp":5,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: input_length: missing"},
		{trace(`{"timestamp":5,"input_length":10,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: output_length: missing"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: missing"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":null}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: missing"},
		{trace(`{"timestamp":5,"input_length":-10,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: input_length: -10"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":-1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: output_length: -1"},
		{trace(`{"timestamp":-5,"input_length":10,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: timestamp: -5"},
		{trace(`{"timestamp":1.5,"input_length":10,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: not a JSON"},
		{trace(ok, `{"timestamp":4,"input_length":10,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 2: timestamp: 4 ms goes back"},
		{trace(`{"timestamp":5,"input_length":17,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: 2 ids for input_length 17: want 3"},
		{trace(`{"timestamp":5,"input_length":8,"output_length":1,"hash_ids":[0,1]}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: 2 ids for input_length 8: want 1"},
		{trace(`{"timestamp":5,"input_length":0,"output_length":1,"hash_ids":[0]}`), TraceOptions{BlockSize: 8}, "want 0"},
		{trace(`{"timestamp":5,"input_length":24,"output_length":1,"hash_ids":[0,1,0]}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: id 0 repeated at 2"},
		{trace(`{"timestamp":5,"input_length":24,"output_length":1,"hash_ids":[0,-1,2]}`), TraceOptions{BlockSize: 8}, "line 1: hash_ids: id -1 at 1 is negative"},
		{trace(ok, `{"timestamp":6,"input_length":16,"output_length":1,"hash_ids":[2,1]}`), TraceOptions{BlockSize: 8}, "line 2: hash_ids: id 1 at 1 follows id 2, but id 0 on an earlier line"},
		{trace(ok, `{"timestamp":6,"input_length":16,"output_length":1,"hash_ids":[1,3]}`), TraceOptions{BlockSize: 8}, "line 2: hash_ids: id 1 at 0 follows the start, but id 0"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1],"block_size":0}`), TraceOptions{}, "line 1: block_size: 0"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1],"block_size":8}`,
			`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0],"block_size":16}`), TraceOptions{}, "line 2: block_size: 16 differs from line 1's 8"},
		{trace(`{"timestamp":5,"input_length":10,"output_length":1,"hash_ids":[0,1],"ttft_ms":-1}`), TraceOptions{BlockSize: 8}, "line 1: predicted_cached_tokens, cached_tokens, ttft_ms, e2e_ms: a negative value"},
		{trace(`{"timestamp":5,"input_length":0,"output_length":1,"hash_ids":[]}`), TraceOptions{}, "none of its 1 requests has hash ids"},
		{trace(ok), TraceOptions{BlockSize: 8, From: time.Second}, "no request of 1 left after the window"},
		{trace(ok), TraceOptions{Speed: -1, SampleSessions: 2, To: -1, Limit: -1, BlockSize: -1},
			"block size -1: want from 0 to 1048576\nspeed -1: want a finite number above 0 (0 takes 1)\nwindow from 0s to -1ns"},
		{trace(ok), TraceOptions{Speed: math.NaN(), SampleRequests: math.NaN()}, "sample requests NaN: want a share from 0 to 1"},
		{trace(ok), TraceOptions{From: 2 * time.Second, To: time.Second}, "window from 2s to 1s"},
		{trace(ok), TraceOptions{Speed: math.Inf(1)}, "speed +Inf"},
		{strings.Repeat("x", maxTraceLine+10), TraceOptions{}, "line 1: longer than"},
	} {
		_, err := ReadTrace(strings.NewReader(tc.text), "x.jsonl", tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "trace x.jsonl") {
			t.Errorf("%.80q: error %v, want one with %q", tc.text, err, tc.want)
		}
	}
	if _, err := LoadTrace("testdata/none.jsonl", TraceOptions{}); err == nil || !strings.Contains(err.Error(), "none.jsonl") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := LoadTrace("testdata", TraceOptions{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if err := (&Trace{}).Validate(); err == nil {
		t.Error("an unloaded trace validates")
	}
}

// appendTraceLine writes r as a request log writes it.
func appendTraceLine(b []byte, r *TraceRecord) []byte {
	m := map[string]any{tracelog.KeyTimestamp: r.At.Milliseconds(), tracelog.KeyInputLength: r.InputLength,
		tracelog.KeyOutputLength: r.OutputLength, tracelog.KeyHashIDs: r.HashIDs, tracelog.KeyBlockSize: r.BlockSize,
		tracelog.KeySession: r.Session, tracelog.KeyModel: r.Model, tracelog.KeyAdapter: r.Adapter,
		tracelog.KeyPolicy: r.Policy, tracelog.KeyReplica: r.Replica, tracelog.KeyStatus: r.Status}
	if r.HasPredicted {
		m[tracelog.KeyPredicted] = r.PredictedCached
	}
	if r.HasCached {
		m[tracelog.KeyCached] = r.Cached
	}
	if r.Measured {
		m[tracelog.KeyTTFT] = float64(r.TTFT) / float64(time.Millisecond)
		m[tracelog.KeyE2E] = float64(r.E2E) / float64(time.Millisecond)
	}
	j, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return append(append(b, j...), '\n')
}

func FuzzReadTrace(f *testing.F) {
	b, err := os.ReadFile(mooncakeSlice)
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var head []string
	for sc.Scan() && len(head) < 5 {
		head = append(head, sc.Text())
	}
	f.Add(trace(head...), 0)
	f.Add(trace(`{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[0,1],"block_size":8,"session":"a","ttft_ms":1.25,"e2e_ms":3,"cached_tokens":8}`,
		`{"timestamp":3,"input_length":0,"output_length":0,"hash_ids":[],"block_size":8}`,
		`{"timestamp":4,"input_length":20,"output_length":1,"hash_ids":[0,1,2],"block_size":8,"predicted_cached_tokens":16}`), 8)
	f.Add(`{"timestamp":0,"input_length":3,"output_length":1,"hash_ids":[9]}`, 4)
	f.Fuzz(func(t *testing.T, text string, bs int) {
		o := TraceOptions{BlockSize: bs}
		tr, err := ReadTrace(strings.NewReader(text), "f", o)
		if err != nil {
			return
		}
		var out []byte
		for i := range tr.Records() {
			out = appendTraceLine(out, &tr.Records()[i])
		}
		again, err := ReadTrace(bytes.NewReader(out), "f", o)
		if err != nil {
			t.Fatalf("an accepted trace re-read: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again.Records(), tr.Records()) {
			t.Fatalf("re-read differs:\n%+v\n%+v", again.Records(), tr.Records())
		}
		src := tr.Start(1, 0)
		for range min(tr.Len(), 3) {
			r := src.Next()
			if len(r.Tokens) == 0 {
				t.Fatal("a request without a prompt")
			}
		}
	})
}

// BenchmarkTraceRead reads the 300-request slice.
func BenchmarkTraceRead(b *testing.B) {
	raw, err := os.ReadFile(mooncakeSlice)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ReadTrace(bytes.NewReader(raw), "slice", TraceOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTraceExpand makes the slice's requests, expanding every
// prompt's hash ids into token ids.
func BenchmarkTraceExpand(b *testing.B) {
	tr, err := LoadTrace(mooncakeSlice, TraceOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tokens := 0
	for _, r := range tr.Records() {
		tokens += r.InputLength
	}
	b.SetBytes(4 * int64(tokens))
	for b.Loop() {
		src := tr.Start(1, 0)
		for range tr.Len() {
			src.Next()
		}
	}
}
