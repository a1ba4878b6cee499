package flow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/policy"
)

func TestParseSLO(t *testing.T) {
	def := policy.SLO{TTFT: 2 * time.Second, TPOT: 80 * time.Millisecond}
	ok := func(h flow.SLOHeaders, want policy.SLO) {
		t.Helper()
		got, err := flow.ParseSLO(h, def)
		if err != nil || got != want {
			t.Errorf("ParseSLO(%q %q %q %q) = %v, %v; want %v", h.TTFT, h.TPOT, h.TTFTAlias, h.TPOTAlias, got, err, want)
		}
	}
	b := func(s string) []byte { return []byte(s) }
	ok(flow.SLOHeaders{}, def) // no header: the model's default
	ok(flow.SLOHeaders{TTFT: b("500")}, policy.SLO{TTFT: 500 * time.Millisecond, TPOT: def.TPOT})
	ok(flow.SLOHeaders{TPOT: b(" 25 ")}, policy.SLO{TTFT: def.TTFT, TPOT: 25 * time.Millisecond})
	ok(flow.SLOHeaders{TTFT: b("12.5"), TPOT: b("1e2")}, policy.SLO{TTFT: 12500 * time.Microsecond, TPOT: 100 * time.Millisecond})
	// The deprecated aliases, and the header winning over its alias.
	ok(flow.SLOHeaders{TTFTAlias: b("300"), TPOTAlias: b("30")}, policy.SLO{TTFT: 300 * time.Millisecond, TPOT: 30 * time.Millisecond})
	ok(flow.SLOHeaders{TTFT: b("400"), TTFTAlias: b("300")}, policy.SLO{TTFT: 400 * time.Millisecond, TPOT: def.TPOT})
	ok(flow.SLOHeaders{TTFT: b("400"), TTFTAlias: b("junk")}, policy.SLO{TTFT: 400 * time.Millisecond, TPOT: def.TPOT})
	ok(flow.SLOHeaders{TTFT: b(""), TTFTAlias: b("300")}, policy.SLO{TTFT: 300 * time.Millisecond, TPOT: def.TPOT})
	ok(flow.SLOHeaders{TTFT: b("3600000")}, policy.SLO{TTFT: flow.MaxSLO, TPOT: def.TPOT})

	bad := func(h flow.SLOHeaders, header string) {
		t.Helper()
		_, err := flow.ParseSLO(h, def)
		var se *flow.SLOError
		if !errors.As(err, &se) || se.Header != header || !strings.Contains(err.Error(), header) {
			t.Errorf("ParseSLO(%q %q %q %q) = %v; want an SLOError naming %s", h.TTFT, h.TPOT, h.TTFTAlias, h.TPOTAlias, err, header)
		}
	}
	for _, v := range []string{"0", "-5", "+5", "abc", "5ms", "0.0000001", "3600001", "1e300", "inf", "NaN",
		"0x10", "1_000", " ", "5 5", ".", "1e", "١٠"} {
		bad(flow.SLOHeaders{TTFT: b(v)}, flow.HeaderSLOTTFT)
	}
	bad(flow.SLOHeaders{TPOT: b("-1")}, flow.HeaderSLOTPOT)
	bad(flow.SLOHeaders{TTFTAlias: b("x")}, flow.HeaderSLOTTFTAlias)
	bad(flow.SLOHeaders{TPOTAlias: b("0")}, flow.HeaderSLOTPOTAlias)
	// A long value is cut in the message.
	_, err := flow.ParseSLO(flow.SLOHeaders{TTFT: b(strings.Repeat("9", 1000))}, def)
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("a 1000-byte value: %v", err)
	}
}

func TestSLOHeadersSet(t *testing.T) {
	var h flow.SLOHeaders
	for _, name := range []string{"X-LLM-D-SLO-TTFT-MS", flow.HeaderSLOTPOT, "X-Slo-Ttft-Ms", flow.HeaderSLOTPOTAlias} {
		if !h.Set(name, []byte(name)) {
			t.Errorf("Set(%s) = false", name)
		}
	}
	if h.Set(flow.HeaderObjective, []byte("x")) {
		t.Error("Set took x-llm-d-inference-objective")
	}
	if string(h.TTFT) != "X-LLM-D-SLO-TTFT-MS" || string(h.TPOT) != flow.HeaderSLOTPOT ||
		string(h.TTFTAlias) != "X-Slo-Ttft-Ms" || string(h.TPOTAlias) != flow.HeaderSLOTPOTAlias {
		t.Errorf("kept %q", h)
	}
}

func TestAttained(t *testing.T) {
	slo := policy.SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}
	f := func(slo policy.SLO, ttft, decode time.Duration, tokens int, want string) {
		t.Helper()
		if got := flow.Attained(slo, ttft, decode, tokens); got != want {
			t.Errorf("Attained(%v, ttft %v, decode %v, %d tokens) = %s, want %s", slo, ttft, decode, tokens, got, want)
		}
	}
	f(slo, time.Second, 99*50*time.Millisecond, 100, flow.SLOMet) // both exactly at the objective
	f(slo, time.Second+1, 0, 1, flow.SLOTTFTMissed)
	f(slo, 2*time.Second, 10*time.Second, 10, flow.SLOTTFTMissed) // TTFT is named first
	f(slo, time.Second, 99*50*time.Millisecond+99, 100, flow.SLOTPOTMissed)
	f(slo, time.Second, time.Hour, 1, flow.SLOMet)              // one token: no TPOT
	f(slo, time.Second, time.Hour, 0, flow.SLOMet)              // usage unknown: TTFT alone
	f(policy.SLO{TPOT: slo.TPOT}, time.Hour, 0, 2, flow.SLOMet) // no TTFT objective
	f(policy.SLO{TTFT: slo.TTFT}, 0, time.Hour, 2, flow.SLOMet) // no TPOT objective
	// No overflow with the largest objective and a long answer.
	f(policy.SLO{TPOT: flow.MaxSLO}, 0, time.Duration(1<<62), 1<<30, flow.SLOMet)
}

// FuzzParseSLO: any header values parse to an objective within MaxSLO or
// to an SLOError naming one of the headers, never a panic.
func FuzzParseSLO(f *testing.F) {
	for _, s := range [][4]string{{"500", "50", "", ""}, {"", "", "300", "30"}, {"1e3", "0.5", "x", ""},
		{"-1", "", "", ""}, {"inf", "nan", "", ""}, {" 7 ", "", "", "0x1p3"}} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	def := policy.SLO{TTFT: time.Second}
	f.Fuzz(func(t *testing.T, ttft, tpot, ttftAlias, tpotAlias string) {
		h := flow.SLOHeaders{TTFT: []byte(ttft), TPOT: []byte(tpot), TTFTAlias: []byte(ttftAlias), TPOTAlias: []byte(tpotAlias)}
		slo, err := flow.ParseSLO(h, def)
		if err != nil {
			var se *flow.SLOError
			if !errors.As(err, &se) || len(se.Value) > 64 {
				t.Fatalf("error %v is not an SLOError with a cut value", err)
			}
			switch se.Header {
			case flow.HeaderSLOTTFT, flow.HeaderSLOTPOT, flow.HeaderSLOTTFTAlias, flow.HeaderSLOTPOTAlias:
			default:
				t.Fatalf("error names %q", se.Header)
			}
			return
		}
		for _, d := range []time.Duration{slo.TTFT, slo.TPOT} {
			if d < 0 || d > flow.MaxSLO {
				t.Fatalf("objective %v out of range", slo)
			}
		}
		if ttft == "" && ttftAlias == "" && slo.TTFT != def.TTFT || tpot == "" && tpotAlias == "" && slo.TPOT != 0 {
			t.Fatalf("absent headers changed the default: %v", slo)
		}
	})
}
