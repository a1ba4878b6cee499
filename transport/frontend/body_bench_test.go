package frontend

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchLimit is server.max_body_bytes in BenchmarkBodyLimit.
const benchLimit = 4 << 20

// chunkedWire is a POST of n body bytes (not JSON) in chunks of size chunk.
func chunkedWire(n, chunk int) []byte {
	var b bytes.Buffer
	b.WriteString("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
	part := bytes.Repeat([]byte{'x'}, chunk)
	for n > 0 {
		c := min(n, chunk)
		b.WriteString(strconv.FormatInt(int64(c), 16) + "\r\n")
		b.Write(part[:c])
		b.WriteString("\r\n")
		n -= c
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// lengthWire is a POST of n body bytes (not JSON) with a Content-Length.
func lengthWire(n int) []byte {
	var b bytes.Buffer
	b.WriteString("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n")
	b.Write(bytes.Repeat([]byte{'x'}, n))
	return b.Bytes()
}

// sendRaw writes wire on a connection of its own while it reads the answer,
// and returns the answer's status; 0 with err when the connection was cut
// before an answer arrived (which HTTP allows for a refused body).
func sendRaw(addr string, wire []byte) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Write(wire) // fails once the server closes after refusing
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	c.Close()
	<-done
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// heapPeak samples the bytes in heap objects until stop, and reports the
// highest sample.
type heapPeak struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Uint64
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	p := &heapPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			if v := heapObjects(); v > p.max.Load() {
				p.max.Store(v)
			}
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *heapPeak) end() uint64 {
	close(p.stop)
	<-p.done
	return p.max.Load()
}

// BenchmarkBodyLimit measures what a request body costs the gateway before
// it is answered: bodies over server.max_body_bytes (4 MiB here), chunked or
// with a Content-Length, and bodies within it (answered 400: they are not
// JSON, so they are read and go no further). Each request has a connection
// of its own; conc requests run at once. alloc-MiB/req is the process's
// allocation per request (the client's is a few KiB), peak-MiB the most
// heap held in objects above the settled heap before the run, with GOGC at
// 10 while it runs so that little of it is garbage not yet collected. Each case
// runs with the bodies read by fasthttp (the gateway before readBody) and by
// readBody, one after the other.
func BenchmarkBodyLimit(b *testing.B) {
	cases := []struct {
		name string
		wire func() []byte
		want int
		conc int
	}{
		{"chunked-1KiB", func() []byte { return chunkedWire(1<<10, 1<<10) }, 400, 1},
		{"length-1KiB", func() []byte { return lengthWire(1 << 10) }, 400, 1},
		{"chunked-limit-64KiB", func() []byte { return chunkedWire(benchLimit-64<<10, 64<<10) }, 400, 1},
		{"length-limit-64KiB", func() []byte { return lengthWire(benchLimit - 64<<10) }, 400, 1},
		{"chunked-limit+64KiB", func() []byte { return chunkedWire(benchLimit+64<<10, 64<<10) }, 413, 1},
		{"chunked-8xlimit", func() []byte { return chunkedWire(8*benchLimit, 64<<10) }, 413, 1},
		{"chunked-limit+64KiB-1B-chunks", func() []byte { return chunkedWire(benchLimit+64<<10, 1) }, 413, 1},
		{"length-limit+64KiB", func() []byte { return lengthWire(benchLimit + 64<<10) }, 413, 1},
		{"chunked-limit+64KiB-x8", func() []byte { return chunkedWire(benchLimit+64<<10, 64<<10) }, 413, 8},
	}
	for _, c := range cases {
		for _, reader := range []string{"fasthttp", "readBody"} {
			b.Run(c.name+"/"+reader, func(b *testing.B) {
				testFasthttpBodies = reader == "fasthttp"
				defer func() { testFasthttpBodies = false }()
				g := start(b, 1, nil, func(cfg *gwConfig) {
					cfg.Server.MaxBodyBytes = benchLimit
				})
				benchBodies(b, g.addr, c.wire(), c.want, c.conc)
			})
		}
	}
}

func benchBodies(b *testing.B, addr string, wire []byte, want, conc int) {
	// One request first, so that pools and the connection's buffers exist.
	if st, err := sendRaw(addr, wire); err == nil && st != want {
		b.Fatalf("answered %d, want %d", st, want)
	}
	// Little garbage is left uncollected, so that the peak is what the
	// gateway holds more than what it allocated.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	base := heapObjects()
	peak := startHeapPeak()
	var cut atomic.Int64
	var wrong atomic.Int64
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := sendRaw(addr, wire)
				switch {
				case err != nil:
					cut.Add(1)
				case st != want:
					wrong.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	top := peak.end()
	runtime.ReadMemStats(&ms1)
	if wrong.Load() > 0 {
		b.Fatalf("%d answers were not %d", wrong.Load(), want)
	}
	reqs := float64(b.N * conc)
	const mib = 1 << 20
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/reqs/mib, "alloc-MiB/req")
	b.ReportMetric(float64(top-min(top, base))/mib, "peak-MiB")
	b.ReportMetric(float64(cut.Load())/reqs, "cut/req")
}
