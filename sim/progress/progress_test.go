package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "points", 4, 1)
	if !strings.Contains(out.String(), "1/4 points (1 resumed)") || !strings.Contains(out.String(), "ETA ?") {
		t.Fatalf("first draw: %q", out.String())
	}
	b.Finished()
	b.Resumed()
	b.AddTotal(-1)
	b.End()
	last := out.String()[strings.LastIndex(out.String(), "\r")+1:]
	if !strings.HasPrefix(last, "[##############################] 3/3 points (2 resumed)") || !strings.HasSuffix(last, "\n") {
		t.Fatalf("last draw: %q", last)
	}
	if strings.Contains(last, "ETA ?") {
		t.Fatalf("no ETA after a unit done: %q", last)
	}
	// A nil writer draws nothing and does not panic.
	New(nil, "runs", 1, 0).Finished()
}
