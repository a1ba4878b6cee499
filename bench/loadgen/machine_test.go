package loadgen

import "testing"

func TestShellJoin(t *testing.T) {
	got := ShellJoin([]string{"simload", "--command", "scripts/bench-sim.sh bin", "it's", ""})
	want := `simload --command 'scripts/bench-sim.sh bin' 'it'\''s' ''`
	if got != want {
		t.Fatalf("ShellJoin = %s, want %s", got, want)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 30000: "30,000", 1234567: "1,234,567", -2000: "-2,000"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
