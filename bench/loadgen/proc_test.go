package loadgen

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	f := func(stat string, want, wantSys time.Duration, wantErr bool) {
		t.Helper()
		got, sys, err := ParseStatCPU([]byte(stat))
		if (err != nil) != wantErr || got != want || sys != wantSys {
			t.Errorf("ParseStatCPU(%q) = %v, %v, %v; want %v, %v, error %v", stat, got, sys, err, want, wantSys, wantErr)
		}
	}
	// utime 250 and stime 17 ticks: 2.67 s, 0.17 s of it in the kernel.
	f("13219 (inferrail) S 13176 13176 27106 0 -1 4194304 98 0 0 0 250 17 0 0 20 0 1 0 188500 3133440 394 1", 2670*time.Millisecond, 170*time.Millisecond, false)
	// The command name may hold spaces and parentheses.
	f("7 (a) b (c)) R 1 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", 70*time.Millisecond, 40*time.Millisecond, false)
	f("7 (x) R 1 1", 0, 0, true)
	f("no command name", 0, 0, true)
	f("7 (x) R 1 1 1 0 -1 0 0 0 0 0 u 4 0", 0, 0, true)
	f("7 (x) R 1 1 1 0 -1 0 0 0 0 0 1 18446744073709551615 0", 0, 0, true)
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tinferrail\nVmPeak:\t 1300000 kB\nVmHWM:\t  150000 kB\nVmRSS:\t  147000 kB\nThreads:\t9\n"
	rss, hwm, threads, err := ParseStatus([]byte(status))
	if err != nil || rss != 147000 || hwm != 150000 || threads != 9 {
		t.Fatalf("ParseStatus = %d, %d, %d, %v", rss, hwm, threads, err)
	}
	if _, _, _, err := ParseStatus([]byte("Name:\tx\nThreads:\t1\n")); err == nil {
		t.Fatal("ParseStatus without VmRSS: no error")
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSKiB <= 0 || s.HWMKiB < s.RSSKiB || s.Threads <= 0 || s.FDs <= 0 {
		t.Fatalf("ReadProc(self) = %+v", s)
	}
}

func TestParseMachineCPU(t *testing.T) {
	got, err := ParseMachineCPU([]byte("cpu  100 2 30 5000 7 1 4 3 9 0\ncpu0 50 1 15 2500 3 0 2 1 0 0\n"))
	// user 100 + nice 2 + system 30 + irq 1 + softirq 4 + steal 3 = 140 ticks.
	if err != nil || got != 1400*time.Millisecond {
		t.Fatalf("ParseMachineCPU = %v, %v", got, err)
	}
	if _, err := ParseMachineCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("no cpu line: no error")
	}
	if _, err := MachineCPU(); err != nil {
		t.Fatal(err)
	}
}

func TestParseCtxSwitches(t *testing.T) {
	status := "Name:\tinferrail\nThreads:\t9\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	if n, err := ParseCtxSwitches([]byte(status)); err != nil || n != (Switches{1200, 34}) || n.Total() != 1234 {
		t.Fatalf("got %+v, %v; want 1200 voluntary, 34 involuntary", n, err)
	}
	if d := (Switches{1200, 34}).Sub(Switches{1000, 30}); d != (Switches{200, 4}) {
		t.Fatalf("Sub = %+v", d)
	}
	for _, bad := range []string{"", "voluntary_ctxt_switches:\t3\n", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n",
		"voluntary_ctxt_switches:\t-1\nnonvoluntary_ctxt_switches:\t1\n",
		"voluntary_ctxt_switches:\t9223372036854775807\nnonvoluntary_ctxt_switches:\t1\n"} {
		if _, err := ParseCtxSwitches([]byte(bad)); err == nil {
			t.Fatalf("%q: no error", bad)
		}
	}
	if n, err := CtxSwitches(os.Getpid()); err != nil || n.Total() <= 0 || n.Voluntary < 0 || n.Involuntary < 0 {
		t.Fatalf("this process: %+v, %v", n, err)
	}
}

func FuzzParseCtxSwitches(f *testing.F) {
	f.Add([]byte("voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t7\n"))
	f.Add([]byte("nonvoluntary_ctxt_switches: 9223372036854775807\nvoluntary_ctxt_switches: 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := ParseCtxSwitches(b); err == nil && (n.Voluntary < 0 || n.Involuntary < 0 || n.Total() < 0) {
			t.Fatalf("negative count %+v from %q", n, b)
		}
	})
}
