package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine bounds one SSE line. vLLM's chunks are a few hundred bytes; a
// runaway line means a broken stream, not a big token.
const MaxLine = 1 << 20

// ErrLineTooLong is returned by SSEReader.Next when a line exceeds MaxLine.
var ErrLineTooLong = errors.New("sse: line longer than 1 MiB")

// SSEReader splits a text/event-stream body into events, following the
// WHATWG HTML "event stream interpretation": lines end in CRLF, LF or a bare
// CR; a leading BOM is dropped; ":" starts a comment; "data" lines are joined
// with LF; a blank line dispatches the event unless its data is empty; an
// unterminated event at EOF is discarded. Only the data and event fields are
// kept, since vLLM sends nothing else.
//
// An SSEReader is owned by one goroutine. The returned slices alias internal
// buffers that the next call to Next overwrites.
type SSEReader struct {
	r          io.Reader
	buf        []byte // buf[start:end] is read but not yet consumed
	start, end int
	rerr       error  // the error that ended reading from r
	data       []byte // data of the event being read, each line followed by LF
	event      []byte // event field of the event being read
	afterCR    bool   // the last line ended in CR, so a leading LF is its pair
	started    bool   // the BOM check is done
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: r, buf: make([]byte, 4096)}
}

// Next returns the next event's type ("" when the stream named none) and its
// data. It returns io.EOF at a clean end of the stream and
// io.ErrUnexpectedEOF when the stream ends inside an event.
func (r *SSEReader) Next() (event, data []byte, err error) {
	r.data, r.event = r.data[:0], r.event[:0]
	pending := false // a field has been seen since the last dispatch
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && pending {
				return nil, nil, io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if len(r.data) == 0 {
				// A blank line with no data dispatches nothing and resets the event type.
				r.event, pending = r.event[:0], false
				continue
			}
			return r.event, r.data[:len(r.data)-1], nil
		}
		if line[0] == ':' {
			continue // a comment, such as a keep-alive, starts no event
		}
		pending = true
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			r.data = append(append(r.data, value...), '\n')
		case "event":
			r.event = append(r.event[:0], value...)
		}
	}
}

// readLine returns the next line without its terminator, aliasing r.buf.
// A last line without a terminator is dropped with io.ErrUnexpectedEOF.
func (r *SSEReader) readLine() ([]byte, error) {
	scanned := 0 // bytes after r.start known to hold no terminator
	empty := 0   // reads in a row that returned nothing, as bufio counts them
	for {
		if r.afterCR && r.start < r.end {
			r.afterCR = false
			if r.buf[r.start] == '\n' {
				r.start++
			}
		}
		if i := bytes.IndexAny(r.buf[r.start+scanned:r.end], "\r\n"); i >= 0 {
			i += r.start + scanned
			line := r.buf[r.start:i]
			r.afterCR = r.buf[i] == '\r'
			r.start = i + 1
			return line, nil
		}
		scanned = r.end - r.start
		if r.rerr != nil {
			if r.rerr == io.EOF && r.start < r.end {
				// An unterminated last line cannot end an event.
				r.start = r.end
				return nil, io.ErrUnexpectedEOF
			}
			return nil, r.rerr
		}
		if r.start > 0 {
			copy(r.buf, r.buf[r.start:r.end])
			r.end -= r.start
			r.start = 0
		}
		if r.end == len(r.buf) {
			if len(r.buf) >= MaxLine {
				r.rerr = ErrLineTooLong
				return nil, r.rerr
			}
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		switch {
		case err != nil:
			r.rerr = err
		case n > 0:
			empty = 0
		default:
			if empty++; empty >= 100 {
				r.rerr = io.ErrNoProgress
			}
		}
	}
}

// StreamTally checks one streamed chat or completion response chunk by chunk:
// content chunks (a non-empty delta.content or text), the finish reason, the
// final usage chunk and the closing [DONE]. It is owned by one goroutine.
type StreamTally struct {
	Content int    // chunks that carried generated text
	Roles   int    // chat role announcements
	Usage   int    // usage.completion_tokens of the final usage chunk, -1 if none
	Finish  string // finish_reason of the finishing chunk
	Done    bool   // data: [DONE] seen
	Text    []byte // the generated text, concatenated
	Events  int    // every data event, [DONE] included
}

// NewStreamTally returns an empty tally.
func NewStreamTally() *StreamTally { return &StreamTally{Usage: -1} }

// chunk is the part of a vLLM stream chunk that the tally reads.
type chunk struct {
	Choices []struct {
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Add reads one event's data. It reports whether the event was a content
// chunk (so the caller can time the first token) and any protocol error: a
// chunk after [DONE], bad JSON, an error event, a second finish or usage.
func (t *StreamTally) Add(data []byte) (content bool, err error) {
	t.Events++
	if t.Done {
		return false, errors.New("event after [DONE]")
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		t.Done = true
		return false, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("chunk %d: %w", t.Events, err)
	}
	if c.Error != nil {
		return false, fmt.Errorf("chunk %d: stream error: %s", t.Events, c.Error.Message)
	}
	if c.Usage != nil && len(c.Choices) == 0 {
		if t.Usage >= 0 {
			return false, fmt.Errorf("chunk %d: second usage chunk", t.Events)
		}
		t.Usage = c.Usage.CompletionTokens
	}
	for _, ch := range c.Choices {
		var text *string
		if ch.Delta != nil {
			if ch.Delta.Role != nil {
				t.Roles++
			}
			text = ch.Delta.Content
		} else {
			text = ch.Text
		}
		if text != nil && *text != "" {
			if t.Finish != "" {
				return false, fmt.Errorf("chunk %d: content after finish", t.Events)
			}
			t.Content++
			t.Text = append(t.Text, *text...)
			content = true
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			if t.Finish != "" {
				return false, fmt.Errorf("chunk %d: second finish", t.Events)
			}
			t.Finish = *ch.FinishReason
		}
	}
	return content, nil
}

// Check reports how the finished stream differs from one that generated
// exactly want tokens and stopped for length, with a usage chunk when
// usage is true.
func (t *StreamTally) Check(want int, usage bool) error {
	var errs []error
	if !t.Done {
		errs = append(errs, errors.New("no [DONE]"))
	}
	if t.Content != want {
		errs = append(errs, fmt.Errorf("%d content chunks, want %d", t.Content, want))
	}
	if usage && t.Usage != want {
		errs = append(errs, fmt.Errorf("usage.completion_tokens %d, want %d", t.Usage, want))
	}
	if !usage && t.Usage >= 0 {
		errs = append(errs, errors.New("usage chunk without include_usage"))
	}
	if t.Finish != "length" {
		errs = append(errs, fmt.Errorf("finish_reason %q, want \"length\"", t.Finish))
	}
	return errors.Join(errs...)
}
