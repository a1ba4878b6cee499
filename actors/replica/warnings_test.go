package replica

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestWarningsLogOnceAndAgainOnChange(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w Warnings
	t0 := time.Unix(100, 0)
	if !w.Raise(log, t0, WarnMetricsPartial, "missing a") {
		t.Fatal("first raise did not log")
	}
	if w.Raise(log, t0.Add(time.Second), WarnMetricsPartial, "missing a") {
		t.Fatal("the same message logged twice")
	}
	if !w.Raise(log, t0.Add(2*time.Second), WarnMetricsPartial, "missing b") {
		t.Fatal("a changed message did not log")
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warn lines, want 2:\n%s", n, buf.String())
	}
	l := w.List()
	if len(l) != 1 || l[0].Message != "missing b" || !l[0].Since.Equal(t0) {
		t.Fatalf("list = %+v", l)
	}
	if !w.Clear(log, WarnMetricsPartial) || w.Active(WarnMetricsPartial) {
		t.Fatal("clear")
	}
	if !w.Raise(log, t0, WarnMetricsPartial, "missing b") {
		t.Fatal("a raise after a clear did not log")
	}
}

func TestNilWarnings(t *testing.T) {
	var w *Warnings
	if w.Raise(nil, time.Now(), WarnEventsSilent, "x") || w.Active(WarnEventsSilent) || len(w.List()) != 0 || w.Clear(nil, WarnEventsSilent) {
		t.Fatal("a nil set holds nothing")
	}
}

func TestWarningCodesDistinct(t *testing.T) {
	seen := map[WarningCode]bool{}
	for _, c := range WarningCodes {
		if seen[c] || c == "" {
			t.Fatalf("code %q twice or empty", c)
		}
		seen[c] = true
	}
}

func TestRaiseNewKeepsTheFirst(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w Warnings
	if !w.RaiseNew(log, time.Unix(1, 0), WarnTokenizerMismatch, "engine 10, gateway 12") {
		t.Fatal("first RaiseNew did not log")
	}
	if w.RaiseNew(log, time.Unix(2, 0), WarnTokenizerMismatch, "engine 11, gateway 13") {
		t.Fatal("a second RaiseNew with other numbers logged")
	}
	if l := w.List(); len(l) != 1 || l[0].Message != "engine 10, gateway 12" {
		t.Fatalf("list = %+v", l)
	}
}
