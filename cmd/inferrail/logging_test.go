package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/config"
)

// TestLoggingFormat: logging.format json writes one JSON object a line, at
// logging.level; text writes slog's key=value lines.
func TestLoggingFormat(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, config.Logging{Level: "warn", Format: "json"})
	log.Info("dropped")
	log.Warn("engine metrics page lacks x", "replica", "r0")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "engine metrics page lacks x" ||
		line["replica"] != "r0" || line["level"] != "WARN" || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("json log %q: %v", buf.String(), err)
	}

	buf.Reset()
	newLogger(&buf, config.Logging{Level: "info", Format: "text"}).Info("ready", "addr", "127.0.0.1:8080")
	if got := buf.String(); !strings.Contains(got, `level=INFO msg=ready addr=127.0.0.1:8080`) {
		t.Fatalf("text log %q", got)
	}
}
