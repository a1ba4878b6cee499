package workload

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/model/tracelog"
)

// KindTrace is Trace's kind in a sweep file.
const KindTrace = "trace"

// DefaultTraceBlockSize is the tokens per hash id of a trace that does not
// say (Mooncake's).
const DefaultTraceBlockSize = 512

// TraceOptions choose what part of a trace replays, and how fast.
type TraceOptions struct {
	// BlockSize is the tokens per hash id when the file does not say;
	// 0 takes DefaultTraceBlockSize.
	BlockSize int `toml:"block_size" json:"block_size"`
	// Speed scales time: 2 replays twice as fast; 0 takes 1.
	Speed float64 `toml:"speed" json:"speed"`
	// From and To are a window of the trace's own clock (its timestamps):
	// a request is kept when From <= timestamp < To; To 0 means the end.
	From time.Duration `toml:"from" json:"from"`
	To   time.Duration `toml:"to" json:"to"`
	// SampleSessions keeps this share of sessions (0 or 1 keeps all),
	// drawn by session from Seed; SampleRequests this share of the
	// requests, drawn by request.
	SampleSessions float64 `toml:"sample_sessions" json:"sample_sessions"`
	SampleRequests float64 `toml:"sample_requests" json:"sample_requests"`
	Seed           uint64  `toml:"seed" json:"seed"`
	// Limit keeps at most this many requests after the other options;
	// 0 keeps all.
	Limit int `toml:"limit" json:"limit"`
}

// TraceRecord is one request of a trace.
type TraceRecord struct {
	// At is when it arrives, on the trace's clock after the window, the
	// sampling and the speed, from the first kept request.
	At time.Duration
	// InputLength and OutputLength are its prompt and generated tokens;
	// HashIDs name its prompt's blocks of BlockSize tokens, the last one
	// possibly partial.
	InputLength, OutputLength int
	HashIDs                   []int64
	BlockSize                 int
	// Session is its conversation: the file's, or inferred from the hash
	// ids when the file names none (Mooncake).
	Session string
	// The request log's fields ("" or 0 in a Mooncake trace).
	Model, Adapter, Policy, Replica string
	Status                          int
	// PredictedCached and Cached are the request log's
	// predicted_cached_tokens and cached_tokens, when HasPredicted and
	// HasCached say it had them.
	PredictedCached, Cached int
	HasPredicted, HasCached bool
	// TTFT and E2E are the latencies the request log measured, when
	// Measured (ttft_ms was present).
	TTFT, E2E time.Duration
	Measured  bool
}

// Trace is a workload recorded in a file: Mooncake's JSON lines
// (timestamp, input_length, output_length, hash_ids) or the gateway's
// request log, which has the same fields and more (observability.request_log).
// It replays the requests in order as completions whose prompts are token
// ids: each hash id stands for BlockSize token ids that depend on the id
// and the position in the block only, so two prompts sharing ids share
// exactly those tokens and an engine's cache hits them as it would have.
//
// A Trace is immutable once loaded; every Start replays it afresh.
type Trace struct {
	// Label is the name in reports; "" takes "trace".
	Label string

	name      string
	digest    string // SHA-256 of the file, hex
	opts      TraceOptions
	recs      []TraceRecord
	read      int // requests the file holds
	noPrompt  int // of them, left out for want of hash ids
	blockSize int
	inferred  bool // sessions inferred from the hash ids
}

// maxTimestamp bounds a timestamp, in ms, so that it is a time.Duration.
const maxTimestamp = math.MaxInt64 / int64(time.Millisecond)

// maxTraceLine bounds one line of a trace: a million-token prompt in
// 512-token blocks takes about 16 KB.
const maxTraceLine = 1 << 20

// maxTraceFile bounds a trace file: Mooncake's first 30 minutes take
// 1.4 MB, so 4 GiB is a file that is not a trace.
const maxTraceFile = 1 << 32

// LoadTrace reads a trace file: Mooncake's JSON lines or a request log.
func LoadTrace(path string, o TraceOptions) (*Trace, error) {
	f, err := openFile(path, maxTraceFile)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return ReadTrace(f, path, o)
}

// traceReader checks a trace's lines as they come.
type traceReader struct {
	name      string
	fallback  int // TraceOptions.BlockSize
	blockSize int // the first record's
	bsLine    int
	last      int64 // the last timestamp
	// logged reports that some line is the request log's (it has a time
	// field): the log writes a line when its request ends, so its
	// timestamps come out of order, and a request that began before the
	// file's first line has a negative one.
	logged   bool
	parent   map[int64]int64
	sessions bool // some line has a session field
	seen     map[int64]struct{}
}

// noParent is the parent of an id that starts a prompt.
const noParent = -1

// ReadTrace reads a trace from r; name names it in errors and reports.
func ReadTrace(r io.Reader, name string, o TraceOptions) (*Trace, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("trace %s: %w", name, err)
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultTraceBlockSize
	}
	if o.Speed == 0 {
		o.Speed = 1
	}
	tr := &traceReader{name: name, fallback: o.BlockSize, parent: make(map[int64]int64), seen: make(map[int64]struct{})}
	t := &Trace{name: name, opts: o}
	var all []TraceRecord
	sum := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(r, sum))
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		rec, err := tr.parse(line, n)
		if err != nil {
			return nil, err
		}
		t.read++
		if rec.HashIDs == nil {
			t.noPrompt++
			continue
		}
		all = append(all, rec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("trace %s: line %d: longer than %d bytes", name, n+1, maxTraceLine)
		}
		return nil, fmt.Errorf("trace %s: line %d: %w", name, n+1, err)
	}
	if t.read == 0 {
		return nil, fmt.Errorf("trace %s: no requests", name)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("trace %s: none of its %d requests has hash ids", name, t.read)
	}
	if tr.logged {
		// A request log's lines are in the order their requests ended:
		// put them in arrival order, the earliest at 0.
		slices.SortStableFunc(all, func(a, b TraceRecord) int { return cmp.Compare(a.At, b.At) })
		first := all[0].At
		for i := range all {
			all[i].At -= first
		}
	}
	t.blockSize = tr.blockSize
	t.digest = hex.EncodeToString(sum.Sum(nil))
	if !tr.sessions {
		t.inferred = true
		inferSessions(all)
	}
	t.recs = o.keep(all)
	if len(t.recs) == 0 {
		return nil, fmt.Errorf("trace %s: no request of %d left after the window and sampling (%s)", name, len(all), o.describe())
	}
	return t, nil
}

// parse reads and checks line n.
func (tr *traceReader) parse(line []byte, n int) (TraceRecord, error) {
	fail := func(field, format string, args ...any) (TraceRecord, error) {
		return TraceRecord{}, fmt.Errorf("trace %s: line %d: %s: %s", tr.name, n, field, fmt.Sprintf(format, args...))
	}
	// Fields a trace does not know are skipped: a Mooncake reader reads
	// Mooncake's four.
	l, err := tracelog.Decode(line, false)
	switch {
	case errors.Is(err, tracelog.ErrMissing):
		return TraceRecord{}, fmt.Errorf("trace %s: line %d: %w", tr.name, n, err)
	case err != nil:
		return TraceRecord{}, fmt.Errorf("trace %s: line %d: not a JSON object of a trace's fields: %w", tr.name, n, err)
	}
	switch {
	case l.Timestamp < -maxTimestamp || l.Timestamp < 0 && l.Time == nil || l.Timestamp > maxTimestamp:
		return fail(tracelog.KeyTimestamp, "%d ms: want from 0 to %d", l.Timestamp, maxTimestamp)
	case l.Timestamp < tr.last && l.Time == nil && !tr.logged:
		return fail(tracelog.KeyTimestamp, "%d ms goes back from the line before's %d", l.Timestamp, tr.last)
	case l.InputLength < 0 || l.InputLength > maxRange:
		return fail(tracelog.KeyInputLength, "%d: want from 0 to %d", l.InputLength, maxRange)
	case l.OutputLength < 0 || l.OutputLength > maxRange:
		return fail(tracelog.KeyOutputLength, "%d: want from 0 to %d", l.OutputLength, maxRange)
	}
	tr.last = l.Timestamp
	tr.logged = tr.logged || l.Time != nil
	bs := tr.fallback
	if l.BlockSize != nil {
		bs = *l.BlockSize
		if bs < 1 || bs > maxRange {
			return fail(tracelog.KeyBlockSize, "%d: want from 1 to %d", bs, maxRange)
		}
	}
	if tr.bsLine == 0 {
		tr.blockSize, tr.bsLine = bs, n
	} else if bs != tr.blockSize {
		return fail(tracelog.KeyBlockSize, "%d differs from line %d's %d", bs, tr.bsLine, tr.blockSize)
	}
	tr.sessions = tr.sessions || l.Session != nil
	rec := TraceRecord{
		At:           time.Duration(l.Timestamp) * time.Millisecond,
		InputLength:  l.InputLength,
		OutputLength: l.OutputLength,
		BlockSize:    bs,
		Model:        l.Model, Adapter: l.Adapter, Policy: l.Policy, Replica: l.Replica, Status: l.Status,
	}
	if l.Session != nil {
		rec.Session = *l.Session
	}
	if l.Predicted != nil {
		rec.PredictedCached, rec.HasPredicted = *l.Predicted, true
	}
	if l.Cached != nil {
		rec.Cached, rec.HasCached = *l.Cached, true
	}
	if l.TTFT != nil {
		rec.TTFT, rec.Measured = msDuration(*l.TTFT), true
		if l.E2E != nil {
			rec.E2E = msDuration(*l.E2E)
		}
	}
	if rec.PredictedCached < 0 || rec.Cached < 0 || rec.TTFT < 0 || rec.E2E < 0 {
		return fail(tracelog.KeyPredicted+", "+tracelog.KeyCached+", "+tracelog.KeyTTFT+", "+tracelog.KeyE2E, "a negative value")
	}
	ids := l.HashIDs
	if len(ids) == 0 {
		// A request log writes [] for a prompt the gateway could not
		// tokenize: there is nothing to replay (ReadTrace counts it).
		return rec, nil
	}
	// The ids cover the prompt exactly: one per whole block and one for
	// the partial block at the end, as both Mooncake and the request log
	// write them.
	if want := (rec.InputLength + bs - 1) / bs; len(ids) != want {
		return fail(tracelog.KeyHashIDs, "%d ids for input_length %d: want %d, one per %d tokens", len(ids), rec.InputLength, want, bs)
	}
	// The ids must chain: an id always follows the same one, so that
	// sharing an id means sharing the whole prefix before it, as a
	// chained block hash does.
	clear(tr.seen)
	prev := int64(noParent)
	for i, id := range ids {
		if id < 0 {
			return fail(tracelog.KeyHashIDs, "id %d at %d is negative", id, i)
		}
		if _, ok := tr.seen[id]; ok {
			return fail(tracelog.KeyHashIDs, "id %d repeated at %d", id, i)
		}
		tr.seen[id] = struct{}{}
		if p, ok := tr.parent[id]; ok && p != prev {
			return fail(tracelog.KeyHashIDs, "id %d at %d follows %s, but %s on an earlier line", id, i, idName(prev), idName(p))
		} else if !ok {
			tr.parent[id] = prev
		}
		prev = id
	}
	rec.HashIDs = ids
	return rec, nil
}

func idName(id int64) string {
	if id == noParent {
		return "the start"
	}
	return "id " + strconv.FormatInt(id, 10)
}

func msDuration(ms float64) time.Duration {
	if !(ms >= 0) {
		return -1 // NaN or negative: refused by the caller
	}
	return time.Duration(math.Round(min(ms*float64(time.Millisecond), math.MaxInt64/2)))
}

// inferSessions names the conversations of a trace without sessions:
// Mooncake's trace names none, so they are inferred, not known. A turn of a
// conversation resends the turn before and its answer, so its whole blocks
// extend the whole blocks of the turn before (whose partial last block,
// grown, got a new id). A request whose whole-block ids extend an earlier
// request's (equal or longer) is in the session of the longest such
// earlier request; otherwise it starts a session of its own, named after
// its index. Only an earlier request with a whole block no request before
// it had counts: one whose whole blocks are all a prefix others share (a
// common system prompt, as id 0 is in Mooncake's trace) says nothing of its
// conversation, and taking it would put every request after it that
// starts with that prefix in one session (17 sessions for the 5,719
// requests of the 30-minute trace, against 4,002 this way). Since every
// id follows one parent only (ReadTrace checks it), a prefix of whole
// blocks is named by its last id.
func inferSessions(recs []TraceRecord) {
	ended := make(map[int64]int) // last whole-block id -> its latest request
	seen := make(map[int64]struct{})
	for i := range recs {
		r := &recs[i]
		whole := r.HashIDs[:r.InputLength/r.BlockSize]
		r.Session = ""
		for k := len(whole); k > 0; k-- {
			if j, ok := ended[whole[k-1]]; ok {
				r.Session = recs[j].Session
				break
			}
		}
		if r.Session == "" {
			r.Session = "s" + strconv.Itoa(i)
		}
		fresh := false
		for _, id := range whole {
			if _, ok := seen[id]; !ok {
				fresh = true
				break
			}
		}
		if fresh {
			ended[whole[len(whole)-1]] = i
		}
		for _, id := range r.HashIDs {
			seen[id] = struct{}{}
		}
	}
}

func (o *TraceOptions) validate() error {
	var errs []error
	if o.BlockSize < 0 || o.BlockSize > maxRange {
		errs = append(errs, fmt.Errorf("block size %d: want from 0 to %d", o.BlockSize, maxRange))
	}
	if !(o.Speed >= 0) || math.IsInf(o.Speed, 0) {
		errs = append(errs, fmt.Errorf("speed %v: want a finite number above 0 (0 takes 1)", o.Speed))
	}
	if o.From < 0 || o.To < 0 || (o.To != 0 && o.To <= o.From) {
		errs = append(errs, fmt.Errorf("window from %v to %v: want 0 <= from < to, or to 0 for the end", o.From, o.To))
	}
	for _, s := range []struct {
		what  string
		share float64
	}{{"sample sessions", o.SampleSessions}, {"sample requests", o.SampleRequests}} {
		if !(s.share >= 0 && s.share <= 1) {
			errs = append(errs, fmt.Errorf("%s %v: want a share from 0 to 1 (0 keeps all)", s.what, s.share))
		}
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("limit %d: want at least 0", o.Limit))
	}
	return errors.Join(errs...)
}

// Streams of the sampling draws.
const (
	streamSessions = 0x73657373696f6e73 // "sessions"
	streamRequests = 0x7265717565737473 // "requests"
)

// kept draws whether an item keyed by key is in a share of the items,
// from seed and stream alone.
func kept(share float64, seed, stream, key uint64) bool {
	if share == 0 || share == 1 {
		return true
	}
	u := float64(mixSeed(seed^stream, int(key&math.MaxInt))>>11) / (1 << 53)
	return u < share
}

// keep returns the records o keeps, their times rebased and scaled.
func (o *TraceOptions) keep(all []TraceRecord) []TraceRecord {
	var out []TraceRecord
	for i, r := range all {
		if r.At < o.From || (o.To != 0 && r.At >= o.To) {
			continue
		}
		sk := uint64(i)
		if r.Session != "" {
			sk = sessionHash(r.Session)
		}
		if !kept(o.SampleSessions, o.Seed, streamSessions, sk) || !kept(o.SampleRequests, o.Seed, streamRequests, uint64(i)) {
			continue
		}
		out = append(out, r)
		if o.Limit > 0 && len(out) == o.Limit {
			break
		}
	}
	if len(out) == 0 {
		return nil
	}
	first := out[0].At
	for i := range out {
		out[i].At = scaled(out[i].At-first, 1/o.Speed)
	}
	return out
}

// sessionHash is FNV-1a of a session's name.
func sessionHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (o *TraceOptions) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "window %v to ", o.From)
	if o.To == 0 {
		b.WriteString("the end")
	} else {
		b.WriteString(o.To.String())
	}
	fmt.Fprintf(&b, ", speed %v", o.Speed)
	if o.SampleSessions != 0 && o.SampleSessions != 1 {
		fmt.Fprintf(&b, ", sessions sampled %v", o.SampleSessions)
	}
	if o.SampleRequests != 0 && o.SampleRequests != 1 {
		fmt.Fprintf(&b, ", requests sampled %v", o.SampleRequests)
	}
	if (o.SampleSessions != 0 && o.SampleSessions != 1) || (o.SampleRequests != 0 && o.SampleRequests != 1) {
		fmt.Fprintf(&b, " (seed %d)", o.Seed)
	}
	if o.Limit > 0 {
		fmt.Fprintf(&b, ", limit %d", o.Limit)
	}
	return b.String()
}

// Records returns the requests kept, after the window, the sampling and
// the speed; At is rebased so that the first is 0. They are t's own: the
// caller must not change them.
func (t *Trace) Records() []TraceRecord { return t.recs }

// Len is how many requests are kept.
func (t *Trace) Len() int { return len(t.recs) }

// Duration is from the first kept request to the last (after Speed).
func (t *Trace) Duration() time.Duration {
	if len(t.recs) == 0 {
		return 0
	}
	return t.recs[len(t.recs)-1].At
}

// Rate is the kept requests per second over Duration (after Speed), as
// Mooncake's README counts it: 0 when they all arrive at once.
func (t *Trace) Rate() float64 {
	d := t.Duration()
	if d <= 0 {
		return 0
	}
	return float64(len(t.recs)) / d.Seconds()
}

// Logged reports whether every kept request has a measured TTFT, as a
// request log's served requests do.
func (t *Trace) Logged() bool {
	for i := range t.recs {
		if !t.recs[i].Measured {
			return false
		}
	}
	return len(t.recs) > 0
}

// Describe is one line for reports: the file, its block size, the window,
// speed and sampling, and how many requests were kept of those read.
func (t *Trace) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s: %d of %d requests kept", t.name, len(t.recs), t.read)
	if t.noPrompt > 0 {
		fmt.Fprintf(&b, " (%d without hash ids left out)", t.noPrompt)
	}
	fmt.Fprintf(&b, ", block size %d, %s, %.2f req/s over %v", t.blockSize, t.opts.describe(), t.Rate(), t.Duration().Round(time.Millisecond))
	if t.inferred {
		b.WriteString(", sessions inferred from shared prefixes")
	}
	return b.String()
}

// Name returns Label, "trace" when empty.
func (t *Trace) Name() string { return orDefault(t.Label, KindTrace) }

// Validate reports whether t holds requests to replay.
func (t *Trace) Validate() error {
	if len(t.recs) == 0 {
		return fmt.Errorf("%s: no trace loaded", t.Name())
	}
	return nil
}

// Start replays the kept requests in order, their times multiplied by
// Rate()/rate: rate Rate() replays the trace's own clock, twice that
// replays it twice as fast; rate 0 (or a trace that spans no time) replays
// it as it is. After the last request the trace starts over, shifted by
// its period (Duration and one mean gap more) each time, so the Source
// never runs dry: a caller replaying it once stops after Len requests, or
// before End(rate). seed is unused: a trace is what it is.
func (t *Trace) Start(_ uint64, rate float64) Source {
	return &traceSource{t: t, scale: t.scale(rate), period: t.period()}
}

// scale is what Start multiplies the trace's times by at rate.
func (t *Trace) scale(rate float64) float64 {
	if own := t.Rate(); own > 0 && rate > 0 && !math.IsInf(rate, 0) {
		return own / rate
	}
	return 1
}

// period is how far each repeat of the trace is shifted: its Duration and
// the mean gap between its requests, or a second for a trace that spans
// no time.
func (t *Trace) period() time.Duration {
	d := t.Duration()
	if d <= 0 {
		return time.Second
	}
	return d + d/time.Duration(len(t.recs))
}

// End is when, replayed at rate, the first request past the end is due:
// a run that sends the requests due before End sends every kept request
// once.
func (t *Trace) End(rate float64) time.Duration {
	return scaled(t.period(), t.scale(rate))
}

// Longest is the most tokens a kept request needs: its prompt and its
// output, as an engine's max_model_len must hold.
func (t *Trace) Longest() int {
	n := 0
	for i := range t.recs {
		n = max(n, t.recs[i].InputLength+max(t.recs[i].OutputLength, 1))
	}
	return n
}

// MarshalJSON writes what the trace replays, as a sweep's run
// specification records it: its label, file name and SHA-256, the options, and
// the requests kept and their rate.
func (t *Trace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Label    string       `json:"label,omitempty"`
		File     string       `json:"file"`
		SHA256   string       `json:"sha256"`
		Options  TraceOptions `json:"options"`
		Requests int          `json:"requests"`
		Rate     float64      `json:"rate"`
	}{t.Label, filepath.Base(t.name), t.digest, t.opts, len(t.recs), t.Rate()})
}

type traceSource struct {
	t      *Trace
	scale  float64
	period time.Duration
	i      int
	shift  time.Duration
}

func (s *traceSource) Next() Request {
	if s.i == len(s.t.recs) {
		s.i = 0
		s.shift += s.period
	}
	r := &s.t.recs[s.i]
	s.i++
	return Request{
		At:        scaled(r.At+s.shift, s.scale),
		Session:   r.Session,
		Tokens:    ExpandHashIDs(make([]uint32, 0, r.InputLength), r.HashIDs, r.BlockSize, r.InputLength),
		MaxTokens: max(r.OutputLength, 1),
		Class:     KindTrace,
	}
}

// scaled is d times f, bounded by a century so that no rate or speed
// overflows a Duration.
func scaled(d time.Duration, f float64) time.Duration {
	const most = 100 * 365 * 24 * time.Hour
	return time.Duration(min(float64(d)*f, float64(most)))
}

// ExpandHashIDs appends the n token ids of a prompt whose blocks of
// blockSize tokens are named by ids: token i of a block is a hash of the
// block's id and i alone, in the simulator's ordinary range
// [token.FirstID, token.VocabSize), and the last block is cut at n.
func ExpandHashIDs(dst []uint32, ids []int64, blockSize, n int) []uint32 {
	for _, id := range ids {
		k := min(blockSize, n)
		if k <= 0 {
			break
		}
		base := mixSeed(uint64(id), 0)
		for i := range k {
			x := base + uint64(i)*0x9e3779b97f4a7c15
			x ^= x >> 31
			x *= 0xbf58476d1ce4e5b9
			x ^= x >> 29
			dst = append(dst, token.FirstID+uint32(x%(token.VocabSize-token.FirstID)))
		}
		n -= k
	}
	return dst
}

var _ Workload = (*Trace)(nil)
