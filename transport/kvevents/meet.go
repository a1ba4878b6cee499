package kvevents

import (
	"fmt"
	"strings"

	"github.com/inferrail/inferrail/model/kvevent"
)

// Meet reports why an engine publishing on pub (the endpoint in its
// --kv-events-config, for data parallel rank 0) and a gateway subscribing on
// sub, listening there when bind, can never exchange a message; nil when
// nothing rules it out. Exactly one side must bind: engine e's publisher
// binds by PublisherBinds, else connects. When the engine binds, the gateway
// must connect to the same transport and port (and ipc path); when it
// connects, to the port the gateway listens on. An empty pub (the engine's
// config unknown) checks only what sub alone settles: an ipc:// or inproc://
// endpoint binds on the engine whatever else it says, so a gateway that
// binds it too can never meet it.
func Meet(e kvevent.Engine, pub, sub string, bind bool) error {
	if pub == "" {
		if bind && (strings.HasPrefix(sub, "ipc://") || strings.HasPrefix(sub, "inproc://")) {
			return fmt.Errorf("both sides bind %s: an engine always binds an ipc:// endpoint, and the gateway "+
				"binds it too (kv_events_bind); set kv_events_bind to false", sub)
		}
		return nil
	}
	rule := `vLLM's publisher binds an endpoint with "*" or "::", or an ipc:// or inproc:// one, and connects otherwise`
	if e == kvevent.EngineSGLang {
		rule = `SGLang's publisher binds an endpoint with "*", "::" or 0.0.0.0, or an ipc:// or inproc:// one, and connects otherwise`
	}
	engineBinds := PublisherBinds(e, pub)
	switch {
	case engineBinds && bind:
		return fmt.Errorf("both sides bind: the engine binds %s (%s) and the gateway binds %s (kv_events_bind); "+
			"set kv_events_bind to false and kv_events to the engine's address", pub, rule, sub)
	case !engineBinds && !bind:
		return fmt.Errorf("both sides connect: the engine connects to %s (%s) and the gateway connects to %s; "+
			`give the engine an endpoint with "*" (tcp://*:PORT), or set kv_events_bind so that the gateway listens`, pub, rule, sub)
	}
	ps, pa, _ := strings.Cut(pub, "://")
	ss, sa, _ := strings.Cut(sub, "://")
	if ps != ss {
		return fmt.Errorf("the engine publishes over %s (%s) and the gateway subscribes over %s (%s)", ps, pub, ss, sub)
	}
	if ps != "tcp" {
		if pa != sa {
			return fmt.Errorf("the engine publishes on %s and the gateway subscribes on %s", pub, sub)
		}
		return nil
	}
	_, pp, perr := splitHostPort(pa)
	_, sp, serr := splitHostPort(sa)
	if perr != nil || serr != nil || pp == 0 || sp == 0 || pp == sp {
		return nil // an unreadable or kernel-picked port settles nothing
	}
	if engineBinds {
		return fmt.Errorf("the engine listens on port %d (%s) and the gateway connects to port %d (%s)", pp, pub, sp, sub)
	}
	return fmt.Errorf("the engine connects to port %d (%s) and the gateway listens on port %d (%s)", pp, pub, sp, sub)
}
