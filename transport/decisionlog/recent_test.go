package decisionlog

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// A memory-only Writer samples one request per recentEvery and keeps the
// last RecentLen records, newest first.
func TestRecentMemory(t *testing.T) {
	w := Memory()
	if !w.Sampled("a") || w.Sampled("b") {
		t.Fatal("the first request is not sampled, or a second one right after it is")
	}
	time.Sleep(recentEvery)
	if !w.Sampled("c") {
		t.Fatal("a request a quarter second later is not sampled")
	}
	for i := range RecentLen + 5 {
		w.Log(&Record{RequestID: strconv.Itoa(i)})
	}
	got := w.Recent()
	if len(got) != RecentLen || got[0].RequestID != strconv.Itoa(RecentLen+4) || got[RecentLen-1].RequestID != "5" {
		t.Fatalf("recent: %d records, first %q", len(got), got[0].RequestID)
	}
	if w.Close() != nil || (*Writer)(nil).Recent() != nil {
		t.Fatal("a memory writer's close failed, or a nil writer has records")
	}
}

// With a file, the memory keeps the records logged to it.
func TestRecentBesideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.jsonl")
	w, err := Open(path, 0.5, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	toFile := 0
	for i := range 20 {
		id := "req-" + strconv.Itoa(i)
		if w.toFile(id) {
			toFile++
		}
		w.Log(&Record{RequestID: id})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines++
	}
	if lines != toFile || toFile == 0 || toFile == 20 || len(w.Recent()) != 20 {
		t.Fatalf("%d lines in the file, %d sampled to it, %d in memory", lines, toFile, len(w.Recent()))
	}
}
