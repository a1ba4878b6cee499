package stress

import (
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// memory is this process's resident memory at one moment, in bytes.
type memory struct {
	RSS  int64 // VmRSS
	Peak int64 // VmHWM, since the process started or resetPeak
	Heap uint64
}

func readMemory() (memory, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return memory{}, err
	}
	rss, hwm, _, err := loadgen.ParseStatus(b)
	if err != nil {
		return memory{}, err
	}
	return memory{RSS: rss << 10, Peak: hwm << 10}, nil
}

// settledMemory collects garbage, returns freed pages to the kernel, lets
// the process sit for a moment and reads its memory: what it holds, not what
// the collector has yet to free.
func settledMemory() (memory, error) {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	debug.FreeOSMemory()
	m, err := readMemory()
	if err != nil {
		return m, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.Heap = ms.HeapInuse
	return m, nil
}

// resetPeak sets VmHWM to the current VmRSS (proc(5), clear_refs "5"), so
// that a later readMemory's Peak is the peak since now.
func resetPeak() error { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// mib renders bytes as MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }
