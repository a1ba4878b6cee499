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
	return sameAddress(pub, sub, engineBinds)
}

// MeetReplay reports why a gateway dialling replay can never reach an
// engine whose replay socket is router (replay_endpoint in its
// --kv-events-config, rank 0): the engine always binds it, so the two must
// name the same transport and port (and ipc path). An empty router means
// the engine serves no replay.
func MeetReplay(router, replay string) error {
	if router == "" {
		return fmt.Errorf("the gateway replays from %s, but the engine's --kv-events-config has no replay_endpoint", replay)
	}
	return sameAddress(router, replay, true)
}

// sameAddress reports why the engine's address eng and the gateway's gw
// are not one: another transport, ipc path or port. engineBinds says which
// side listens, for the message.
func sameAddress(eng, gw string, engineBinds bool) error {
	es, ea, _ := strings.Cut(eng, "://")
	gs, ga, _ := strings.Cut(gw, "://")
	if es != gs {
		return fmt.Errorf("the engine uses %s (%s) and the gateway %s (%s)", es, eng, gs, gw)
	}
	if es != "tcp" {
		if ea != ga {
			return fmt.Errorf("the engine uses %s and the gateway %s", eng, gw)
		}
		return nil
	}
	_, ep, eerr := splitHostPort(ea)
	_, gp, gerr := splitHostPort(ga)
	if eerr != nil || gerr != nil || ep == 0 || gp == 0 || ep == gp {
		return nil // an unreadable or kernel-picked port settles nothing
	}
	if engineBinds {
		return fmt.Errorf("the engine listens on port %d (%s) and the gateway connects to port %d (%s)", ep, eng, gp, gw)
	}
	return fmt.Errorf("the engine connects to port %d (%s) and the gateway listens on port %d (%s)", ep, eng, gp, gw)
}
