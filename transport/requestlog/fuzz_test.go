package requestlog

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Any entry encodes as one line ReadLines (tracelog.Decode, strictly)
// decodes back to the same values, whatever its strings hold: the
// encoder writes only the format's fields, with tracelog's names.
func FuzzEncode(f *testing.F) {
	f.Add("inferrail/sim-8b", "cost_model", "r1", uint64(0x9f3a0c1e22b4d5a6), 12000, 300, 200, int64(123400), int64(4567800))
	f.Add("m\"\\\n\x00\xff", "", "é", uint64(0), 0, 0, 499, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, model, pol, replica string, session uint64, in, out, status int, ttft, e2e int64) {
		c := &encoder{blockSize: 512, maxIDs: 8}
		c.Reset()
		ids := []uint64{7, 8, 7, 9}
		e := Entry{Arrival: time.Unix(1, 0), Model: model, Policy: pol, Replica: replica, Session: session,
			InputLength: in, OutputLength: out, Status: status, FirstByte: time.Duration(ttft), End: time.Duration(e2e), ids: &ids}
		b, ok := c.Append(nil, e)
		if !ok || bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
			t.Fatalf("%v %q", ok, b)
		}
		ls, err := ReadLines(bytes.NewReader(b))
		if err != nil || len(ls) != 1 {
			t.Fatalf("%v: %q", err, b)
		}
		l := ls[0]
		if l.InputLength != in || l.OutputLength != out || l.Status != status || l.Timestamp != 0 ||
			len(l.HashIDs) != 4 || l.HashIDs[0] != 0 || l.HashIDs[2] != 0 || l.HashIDs[3] != 2 || (e2e > 0) != (l.E2E != nil) {
			t.Fatalf("%+v from %q", l, b)
		}
		for _, p := range [][2]string{{model, l.Model}, {pol, l.Policy}, {replica, l.Replica}} {
			if utf8.ValidString(p[0]) && p[0] != p[1] {
				t.Fatalf("%q came back as %q", p[0], p[1])
			}
		}
		if l.Session == nil || (session == 0) != (*l.Session == "") || session != 0 && len(*l.Session) != 16 {
			t.Fatalf("session %x as %v", session, l.Session)
		}
		if l.BlockSize == nil || *l.BlockSize != 512 || l.Time == nil || *l.Time != "1970-01-01T00:00:01Z" {
			t.Fatalf("block size %v, time %v from %q", l.BlockSize, l.Time, b)
		}
	})
}

// ReadLines fails on anything that is not a log, with an error naming the
// line, and never panics.
func FuzzReadLines(f *testing.F) {
	f.Add(`{"timestamp":0,"input_length":1,"output_length":2,"hash_ids":[0],"block_size":512}` + "\n")
	f.Add(`{"timestamp":0}`)
	f.Add(`{"timestamp":0,"input_length":1,"output_length":2,"hash_ids":null}`)
	f.Add(`{"x":1}`)
	f.Add("[]\n{}")
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ReadLines(strings.NewReader(s))
		if err != nil && !strings.HasPrefix(err.Error(), "request log") {
			t.Fatalf("error %v", err)
		}
		for _, l := range ls {
			if l.HashIDs == nil {
				t.Fatalf("a line without hash_ids: %+v", l)
			}
		}
	})
}
