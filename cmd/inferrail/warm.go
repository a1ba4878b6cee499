package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/admin"
	"github.com/inferrail/inferrail/transport/auth"
)

// warmStartTimeout bounds the read of one peer's index snapshot.
const warmStartTimeout = 10 * time.Second

// warmStart warms fl's indexes from the first peer of
// index.warm_start_from whose snapshot can be read, before the gateway
// serves. When none can, it says so once (a log line, and the
// index_warm_start_failed warning on every replica, which the metrics and
// /admin/replicas show) and the indexes start cold.
func warmStart(ctx context.Context, cfg *config.Config, fl *fleet.Fleet, log *slog.Logger) {
	peers := cfg.Index.WarmStartFrom
	if len(peers) == 0 {
		return
	}
	token, err := auth.AdminToken(cfg)
	if err != nil {
		fl.Warn(log, replica.WarnWarmStart, fmt.Sprintf("index.warm_start_from: %v; the index starts cold", err))
		return
	}
	c := &http.Client{Timeout: warmStartTimeout}
	var errs []string
	for _, p := range peers {
		start := time.Now()
		snap, err := admin.FetchSnapshot(ctx, c, p, token)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		warmed := fl.WarmIndex(snap)
		log.Info("index warmed from a peer", "peer", p, "replicas", warmed, "took", time.Since(start).Round(time.Millisecond))
		return
	}
	fl.Warn(log, replica.WarnWarmStart, fmt.Sprintf("index.warm_start_from: no peer's index snapshot could be read (%s); "+
		"the index starts cold and learns from routing decisions and KV events", strings.Join(errs, "; ")), "peers", peers)
}
