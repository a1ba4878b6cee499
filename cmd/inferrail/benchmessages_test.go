package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// bench messages end to end, short: the virtual rows and then each router
// on its own in-process fleet over /v1/messages, without errors; the
// raw-text router's gateway really hashes the billing header (its
// predictions miss where cost_model's hit), which no config key could
// make it do.
func TestBenchMessagesInProcess(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "messages", "--seeds", "1", "--duration", "10s", "--warmup", "2s", "--events", "on",
		"--set", "prompts = 1\nsystem_tokens = [300, 600]\nsteps = [3, 6]\nresult_tokens = [20, 80]\ntool_time = [\"200ms\", \"500ms\"]",
		"--rate", "8", "--real", "--real-duration", "4s", "--real-warmup", "1s"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	exact := map[string]float64{}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "| virtual time | ") && !strings.HasPrefix(line, "| real time | ") {
			continue
		}
		rows++
		cols := strings.Split(line, "|")
		mode, router, errs, pred := strings.TrimSpace(cols[1]), strings.TrimSpace(cols[2]), strings.TrimSpace(cols[5]), strings.TrimSpace(cols[9])
		if errs != "0" || (pred == "–") != (router == "round_robin") {
			t.Fatalf("errors %q, predictions %q: %s", errs, pred, line)
		}
		if mode == "real time" && pred != "–" {
			x, err := strconv.ParseFloat(strings.Fields(pred)[0], 64)
			if err != nil {
				t.Fatal(err)
			}
			exact[router] = x
		}
	}
	if rows != 6 {
		t.Fatalf("%d rows, want 3 virtual and 3 real:\n%s", rows, out.String())
	}
	t.Logf("%s", out.String())
	if exact["cost_model"] <= exact["cost_model, billing header hashed"] {
		t.Fatalf("real time: cost_model exact %.3f, the raw-text router %.3f:\n%s", exact["cost_model"], exact["cost_model, billing header hashed"], out.String())
	}
}
