package openai

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

func TestIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := RandomID(rng)
		if !hex16.MatchString(id) || seen[id] {
			t.Fatalf("RandomID = %q (dup %v)", id, seen[id])
		}
		seen[id] = true
	}
	if got := string(appendHex16(nil, 0x0123456789abcdef)); got != "0123456789abcdef" {
		t.Errorf("appendHex16 = %q", got)
	}
	if got := string(appendHex16(nil, 7)); got != "0000000000000007" {
		t.Errorf("appendHex16 pads: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { Sink = AppendRandomID(Sink[:0], rng) }); n != 0 {
		t.Errorf("AppendRandomID allocates %v", n)
	}

	// X-Request-Id header, even empty, then the body's request_id, then random.
	f := func(h string, hasH bool, body Opt[string], want string) {
		t.Helper()
		if got := BaseRequestID(h, hasH, body, rand.New(rand.NewPCG(1, 1))); got != want {
			t.Errorf("BaseRequestID(%q, %v, %+v) = %q, want %q", h, hasH, body, got, want)
		}
	}
	random := RandomID(rand.New(rand.NewPCG(1, 1)))
	f("hdr", true, Opt[string]{"body", true}, "hdr")
	f("", true, Opt[string]{"body", true}, "")
	f("", false, Opt[string]{"body", true}, "body")
	f("", false, Opt[string]{"", true}, "")
	f("", false, Opt[string]{}, random)

	if ChatID("x") != "chatcmpl-x" || CompletionID("x") != "cmpl-x" {
		t.Error("ChatID / CompletionID")
	}
	if got := PermissionID(rng); !regexp.MustCompile(`^modelperm-[0-9a-f]{16}$`).MatchString(got) {
		t.Errorf("PermissionID = %q", got)
	}
	if got := Fingerprint("0.26.0", "2844599c"); got != "vllm-0.26.0-2844599c" {
		t.Errorf("Fingerprint = %q", got)
	}
}
