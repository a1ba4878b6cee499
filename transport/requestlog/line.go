package requestlog

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/inferrail/inferrail/model/tracelog"
)

// ReadFile is ReadLines of the file at path.
func ReadFile(path string) ([]tracelog.Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLines(f)
}

// maxLine bounds a line ReadLines takes: a prompt of 8M tokens at 512 per
// id, in ids of up to 7 digits.
const maxLine = 1 << 17 * 8

// ReadLines decodes the lines of a log strictly (tracelog.Decode): a field
// the format does not name, a missing Mooncake field or a line that is not
// one JSON object fails, naming the line. For tests and tools that check a
// log; a replay reads it with sim/workload's trace reader.
func ReadLines(r io.Reader) ([]tracelog.Line, error) {
	var out []tracelog.Line
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLine)
	for n := 1; sc.Scan(); n++ {
		l, err := tracelog.Decode(sc.Bytes(), true)
		if err != nil {
			return out, fmt.Errorf("request log line %d: %w", n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("request log: %w", err)
	}
	return out, nil
}
