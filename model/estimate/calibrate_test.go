package estimate

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// TestMeasure: a sample counts only for a request with nothing queued
// ahead and nothing added behind before its first token; its time is the
// time to first token less the decode interference of the requests
// running at its assignment, and it says whether any decoded.
func TestMeasure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := cost.Default()
	m.DecodeStepSecs = 1 // fitted, never taken off a sample
	ms := time.Millisecond

	r := New(16)
	r.Queue.Add(t0, 50*ms)
	lone := r.Time(300, 100, 4, t0)
	r.Queue.Add(t0.Add(80*ms), 50*ms) // behind it, after its first token
	behind := r.Time(10, 0, 0, t0.Add(80*ms))
	s, ok := r.Measure(lone, m, t0.Add(60*ms))
	want := 60*ms - 4*time.Duration(m.DecodeInterferenceSecs*1e9)
	if !ok || s.Computed != 300 || s.Cached != 100 || !s.Decoding || s.Secs != want.Seconds() {
		t.Errorf("lone request: %+v, %v; want 300 after 100 in %v, decoding", s, ok, want)
	}
	if _, ok := r.Measure(lone, m, t0.Add(90*ms)); ok {
		t.Error("a request with another added before its first token counted")
	}
	if _, ok := r.Measure(behind, m, t0.Add(120*ms)); ok {
		t.Error("a request with another queued ahead counted")
	}
	r.FirstByte(t0.Add(60 * ms))
	r.FirstByte(t0.Add(120 * ms))
	r.Queue.Add(t0.Add(time.Second), 0)
	idle := r.Time(10, 0, 0, t0.Add(time.Second))
	if s, ok := r.Measure(idle, m, t0.Add(time.Second)); ok {
		t.Errorf("a sample of no time counted: %+v", s)
	}
	if s, ok := r.Measure(idle, m, t0.Add(time.Second+ms)); !ok || s.Decoding || s.Secs != 0.001 {
		t.Errorf("idle request: %+v, %v; want 1ms, not decoding", s, ok)
	}
	if !Agrees(100, 116, 16) || Agrees(100, 117, 16) || !Agrees(116, 100, 16) || Agrees(117, 100, 16) {
		t.Error("Agrees is not within one block")
	}
}
