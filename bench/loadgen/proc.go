package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"syscall"
	"time"
)

// ClockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. The
// kernel reports it as 100 on every architecture Go supports (it is fixed in
// the ABI, whatever CONFIG_HZ is), and Go cannot call sysconf without cgo.
const ClockTick = 10 * time.Millisecond

// ProcSample is what the benchmarks read about a process at one moment.
type ProcSample struct {
	CPU     time.Duration // utime + stime, in ClockTick steps
	SysCPU  time.Duration // stime alone: the part of CPU spent in the kernel
	RSSKiB  int64         // VmRSS
	HWMKiB  int64         // VmHWM, the peak RSS so far
	Threads int
	FDs     int // open file descriptors
}

// ReadProc samples process pid from /proc.
func ReadProc(pid int) (ProcSample, error) {
	var s ProcSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.CPU, s.SysCPU, err = ParseStatCPU(stat); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.RSSKiB, s.HWMKiB, s.Threads, err = ParseStatus(status); err != nil {
		return s, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	return s, nil
}

// ParseStatCPU returns utime+stime, and stime alone, from the text of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may
// hold spaces and ')', so fields are counted from the last ')': utime and
// stime are fields 14 and 15.
func ParseStatCPU(stat []byte) (cpu, sys time.Duration, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("no command name")
	}
	f := bytes.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(string(f[11]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(string(f[12]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	if utime > math.MaxInt64/uint64(ClockTick)/2 || stime > math.MaxInt64/uint64(ClockTick)/2 {
		return 0, 0, fmt.Errorf("utime %d or stime %d: too large", utime, stime)
	}
	return time.Duration(utime+stime) * ClockTick, time.Duration(stime) * ClockTick, nil
}

// ParseStatus reads VmRSS, VmHWM (both kB, which the kernel means as KiB) and
// Threads from the text of /proc/<pid>/status.
func ParseStatus(status []byte) (rssKiB, hwmKiB int64, threads int, err error) {
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, perr := strconv.ParseInt(string(f[0]), 10, 64)
		switch string(k) {
		case "VmRSS":
			rssKiB, seen = n, seen|1
		case "VmHWM":
			hwmKiB, seen = n, seen|2
		case "Threads":
			threads, seen = int(n), seen|4
		default:
			continue
		}
		if perr != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", k, perr)
		}
	}
	if seen != 7 {
		return 0, 0, 0, errors.New("missing VmRSS, VmHWM or Threads")
	}
	return rssKiB, hwmKiB, threads, nil
}

// Switches counts how often a process's threads were switched out.
// Voluntary: a thread slept (in epoll_wait, on a futex, in nanosleep) and
// was woken later. Involuntary: the kernel preempted a thread that could
// still run, typically for a task it had just woken by writing to a socket.
type Switches struct {
	Voluntary, Involuntary int64
}

// Total is both kinds.
func (s Switches) Total() int64 { return s.Voluntary + s.Involuntary }

// Sub is s less an earlier count.
func (s Switches) Sub(o Switches) Switches {
	return Switches{s.Voluntary - o.Voluntary, s.Involuntary - o.Involuntary}
}

// Add is s and o together.
func (s Switches) Add(o Switches) Switches {
	return Switches{s.Voluntary + o.Voluntary, s.Involuntary + o.Involuntary}
}

// CtxSwitches is how many times the threads of process pid have been
// switched out so far, summed over /proc/<pid>/task/*/status. Each is a
// wake-up paid for later; on a VM they are much of a proxy's CPU
// (bench/results/gateway-*.md). A thread that has exited is no longer
// counted.
func CtxSwitches(pid int) (Switches, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return Switches{}, err
	}
	var sum Switches
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited since the listing
		}
		n, err := ParseCtxSwitches(b)
		if err != nil {
			return Switches{}, fmt.Errorf("/proc/%d/task/%s/status: %w", pid, t.Name(), err)
		}
		sum = sum.Add(n)
	}
	return sum, nil
}

// ParseCtxSwitches reads voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches from the text of a /proc status file. Each
// must be there, a count that its sum with the other cannot overflow.
func ParseCtxSwitches(status []byte) (Switches, error) {
	var s Switches
	seen := 0
	for line := range bytes.Lines(status) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		bit := 0
		switch string(k) {
		case "voluntary_ctxt_switches":
			dst, bit = &s.Voluntary, 1
		case "nonvoluntary_ctxt_switches":
			dst, bit = &s.Involuntary, 2
		default:
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n < 0 {
			return Switches{}, fmt.Errorf("%s: %q is not a count", k, bytes.TrimSpace(v))
		}
		*dst, seen = n, seen|bit
	}
	if seen != 3 {
		return Switches{}, errors.New("missing voluntary_ctxt_switches or nonvoluntary_ctxt_switches")
	}
	if s.Voluntary > math.MaxInt64-s.Involuntary {
		return Switches{}, fmt.Errorf("voluntary %d and involuntary %d switches overflow their sum", s.Voluntary, s.Involuntary)
	}
	return s, nil
}

// MachineCPU is the CPU time all processes have used, summed over CPUs,
// from the first line of /proc/stat: user, nice, system, irq, softirq and
// steal (guest time is already inside user).
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return ParseMachineCPU(b)
}

// ParseMachineCPU is MachineCPU on the text of /proc/stat.
func ParseMachineCPU(stat []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, errors.New("/proc/stat: no cpu line")
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * ClockTick, nil
}

// SelfCPU is the CPU time this process has used.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MiB converts KiB to MiB.
func MiB(kib int64) float64 { return float64(kib) / 1024 }
