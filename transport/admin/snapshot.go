package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/model/dump"
)

// SnapshotPath is the route of an instance's index snapshot.
const SnapshotPath = "/admin/index/snapshot"

// Indexes is what GET /admin/index/snapshot reads: every replica's index
// snapshot (fleet.Fleet.DumpIndex).
type Indexes interface {
	DumpIndex(timeout time.Duration) (*dump.Snapshot, error)
}

// snapshotTimeout bounds the replica actors' answers to one snapshot.
const snapshotTimeout = 5 * time.Second

// WithIndexSnapshot turns on GET /admin/index/snapshot, the snapshot a
// peer instance warms its index from (index.warm_start_from), under the
// admin port's auth; call it before Serve.
func (s *Server) WithIndexSnapshot(ix Indexes) *Server {
	s.indexes = ix
	return s
}

// snapshot answers GET /admin/index/snapshot: the encoded snapshot
// (model/dump), at most dump.DefaultMaxBytes.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx) {
	snap, err := s.indexes.DumpIndex(snapshotTimeout)
	if err != nil {
		writeErr(ctx, fasthttp.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
		return
	}
	b := dump.Append(nil, snap)
	if len(b) > dump.DefaultMaxBytes {
		writeErr(ctx, fasthttp.StatusInternalServerError, "InternalServerError",
			fmt.Sprintf("index snapshot of %d bytes exceeds the %d a peer reads", len(b), dump.DefaultMaxBytes))
		return
	}
	ctx.SetContentType(dump.ContentType)
	ctx.SetBody(b)
}

// FetchSnapshot reads a peer instance's index snapshot from its admin URL
// (scheme and host, as index.warm_start_from lists it), with token as the
// bearer token when not empty, through c. It reads at most
// dump.DefaultMaxBytes and fails on anything but a 200 whose body decodes.
func FetchSnapshot(ctx context.Context, c *http.Client, base string, token []byte) (*dump.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+SnapshotPath, nil)
	if err != nil {
		return nil, err
	}
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	req.Header.Set("Accept", dump.ContentType)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, dump.DefaultMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the snapshot: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body[:min(len(body), 300)]))
		return nil, fmt.Errorf("%s: status %d: %s", req.URL, resp.StatusCode, msg)
	}
	snap, err := dump.Decode(body, dump.DefaultMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.URL, err)
	}
	return snap, nil
}
