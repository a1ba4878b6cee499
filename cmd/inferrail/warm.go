package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
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
	var errs []string
	if cfg.Index.WarmStartDNS != "" {
		found, err := dnsPeers(ctx, net.DefaultResolver, cfg.Index.WarmStartDNS)
		if err != nil {
			errs = append(errs, err.Error())
		}
		peers = append(slices.Clip(peers), found...)
	}
	if len(peers) == 0 && len(errs) == 0 {
		return
	}
	token, err := auth.AdminToken(cfg)
	if err != nil {
		fl.Warn(log, replica.WarnWarmStart, fmt.Sprintf("index.warm_start_from: %v; the index starts cold", err))
		return
	}
	c := &http.Client{Timeout: warmStartTimeout}
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

// dnsPeers returns the admin URL raw once for every address its host name
// resolves to, in the resolver's order, with the host replaced by the
// address: index.warm_start_dns.
func dnsPeers(ctx context.Context, r *net.Resolver, raw string) ([]string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("index.warm_start_dns: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, warmStartTimeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("index.warm_start_dns: %w", err)
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		p := *u
		p.Host = a
		if port := u.Port(); port != "" {
			p.Host = net.JoinHostPort(a, port)
		} else if strings.Contains(a, ":") {
			p.Host = "[" + a + "]"
		}
		out = append(out, p.String())
	}
	return out, nil
}
