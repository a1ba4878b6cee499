package requestlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Line is a line of the log as a reader decodes it; the optional fields
// are nil when left out.
type Line struct {
	Timestamp    int64    `json:"timestamp"`
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []int    `json:"hash_ids"`
	BlockSize    int      `json:"block_size"`
	Time         string   `json:"time"`
	Model        string   `json:"model"`
	Adapter      string   `json:"adapter"`
	Session      string   `json:"session"`
	Policy       string   `json:"policy"`
	Replica      string   `json:"replica"`
	Status       int      `json:"status"`
	Predicted    *int     `json:"predicted_cached_tokens"`
	Cached       *int     `json:"cached_tokens"`
	TTFT         *float64 `json:"ttft_ms"`
	E2E          *float64 `json:"e2e_ms"`
}

// ReadFile is ReadLines of the file at path.
func ReadFile(path string) ([]Line, error) {
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

// ReadLines decodes the lines of a log, strictly: a field it does not
// know, a missing Mooncake field or a line that is not one JSON object
// fails, naming the line. For tests and tools that check a log; a replay
// reads the Mooncake fields on its own.
func ReadLines(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLine)
	for n := 1; sc.Scan(); n++ {
		var l Line
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return out, fmt.Errorf("request log line %d: %w", n, err)
		}
		if dec.More() {
			return out, fmt.Errorf("request log line %d: more than one value", n)
		}
		// The Mooncake fields must be there, not merely zero.
		var m struct {
			Timestamp    *int64 `json:"timestamp"`
			InputLength  *int   `json:"input_length"`
			OutputLength *int   `json:"output_length"`
		}
		json.Unmarshal(sc.Bytes(), &m) // it decoded as a Line
		if m.Timestamp == nil || m.InputLength == nil || m.OutputLength == nil || l.HashIDs == nil {
			return out, fmt.Errorf("request log line %d: a Mooncake field (timestamp, input_length, output_length, hash_ids) is missing", n)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("request log: %w", err)
	}
	return out, nil
}
