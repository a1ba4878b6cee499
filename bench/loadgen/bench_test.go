package loadgen

import (
	"io"
	"strings"
	"testing"
)

// Sink keeps benchmark results alive.
var Sink int

// BenchmarkReadStream is the load generator's cost per streamed response of
// three tokens: SSE framing, chunk decoding and the checks.
func BenchmarkReadStream(b *testing.B) {
	b.ReportAllocs()
	r := strings.NewReader(chatStream)
	for b.Loop() {
		r.Reset(chatStream)
		st := NewStreamTally()
		sr := NewSSEReader(r)
		for {
			_, data, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Add(data); err != nil {
				b.Fatal(err)
			}
		}
		Sink += st.Content
	}
}
