package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
)

// group is a DNS group as the fleet actor resolves it.
type group struct {
	cfg  *config.DNSGroup
	base *url.URL // the group's URL
	host string   // the name resolved
	port string   // the port every member is reached on
	ids  []string // the current members, in address order
	// failing is set while lookups fail, so that a long outage is logged
	// when it starts and when it ends, not at every refresh.
	failing bool
}

func newGroup(g *config.DNSGroup) (*group, error) {
	u, err := url.Parse(g.URL)
	if err != nil {
		return nil, fmt.Errorf("fleet: discovery.dns %s: url: %w", g.Name, err)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("fleet: discovery.dns %s: url %q has no host", g.Name, g.URL)
	}
	if g.Refresh <= 0 {
		return nil, fmt.Errorf("fleet: discovery.dns %s: refresh %v is not positive", g.Name, g.Refresh)
	}
	return &group{cfg: g, base: u, host: u.Hostname(), port: port}, nil
}

// events returns the KV event stream of the member at addr: the group's
// kv_events_port (and kv_events_replay_port) on that address, or none.
func (g *group) events(addr netip.Addr) replica.EventStream {
	if g.cfg.KVEventsPort == 0 {
		return replica.EventStream{}
	}
	at := func(port int) string { return "tcp://" + net.JoinHostPort(addr.String(), strconv.Itoa(port)) }
	es := replica.EventStream{Endpoint: at(g.cfg.KVEventsPort), Engine: kvevent.Engine(g.cfg.EngineType)}
	if g.cfg.KVEventsReplayPort != 0 {
		es.Replay = at(g.cfg.KVEventsReplayPort)
	}
	return es
}

// dnsMember is one address of a group as a replica.
type dnsMember struct {
	id, url string
	addr    netip.Addr
}

// members turns a lookup's addresses into replicas: one per distinct IP,
// named <group>-<ip>-<port> and reached at the group's URL with the host
// replaced by the IP, in address order. An IPv6 address's colons become
// dashes in the id, which allows only letters, digits, '.', '_' and '-'.
// Entries that are not IP addresses are returned apart.
func (g *group) members(addrs []string) (ms []dnsMember, bad []string) {
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			bad = append(bad, a)
			continue
		}
		ip = ip.Unmap().WithZone("")
		if seen[ip] {
			continue
		}
		seen[ip] = true
		u := *g.base
		u.Host = net.JoinHostPort(ip.String(), g.port)
		ms = append(ms, dnsMember{
			id:   g.cfg.Name + "-" + strings.ReplaceAll(ip.String(), ":", "-") + "-" + g.port,
			url:  u.String(),
			addr: ip,
		})
	}
	slices.SortFunc(ms, func(a, b dnsMember) int { return a.addr.Compare(b.addr) })
	return ms, bad
}

// endpoints turns a lookup's addresses into the group's members, as
// members does, each with the group's models, labels, caps and KV event
// stream on its address. Entries that are not IP addresses are logged.
func (g *group) endpoints(log *slog.Logger, addrs []string) []Endpoint {
	ms, bad := g.members(addrs)
	if len(bad) > 0 {
		log.Warn("fleet: DNS lookup returned entries that are not IP addresses", "group", g.cfg.Name, "entries", bad)
	}
	eps := make([]Endpoint, len(ms))
	for i, m := range ms {
		eps[i] = Endpoint{ID: m.id, URL: m.url, Models: g.cfg.Models, Labels: g.cfg.Labels, Events: g.events(m.addr),
			MaxConcurrency: g.cfg.MaxConcurrency, MaxPending: g.cfg.MaxPending, KVCapacityBlocks: g.cfg.KVCapacityBlocks}
	}
	return eps
}

// lookupTimeout bounds one lookup of a group refreshed every refresh: no
// longer than the refresh (a lookup does not overlap the next), but at least
// a second and at most ten.
func lookupTimeout(refresh time.Duration) time.Duration {
	return min(max(refresh, time.Second), 10*time.Second)
}

// resolverRun is one incarnation's resolver goroutine for a group. Its
// address tags the results it sends.
type resolverRun struct {
	cancel context.CancelFunc
}

// resolveLoop looks host up every refresh until ctx ends, sending each
// result to the fleet actor at self. The first lookup is Start's, so the
// loop begins by waiting.
func resolveLoop(ctx context.Context, run *resolverRun, send actor.SenderContext, self *actor.PID,
	r Resolver, idx int, host string, refresh time.Duration) {
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout(refresh))
		addrs, err := r.LookupHost(lctx, host)
		cancel()
		if ctx.Err() != nil {
			return
		}
		send.Send(self, &resolved{group: idx, run: run, addrs: addrs, err: err})
	}
}
