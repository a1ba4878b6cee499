package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/transport/calibrate"
	"github.com/inferrail/inferrail/transport/kvevents"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// errTokenizerCheck is check --url's error when a tokenizer disagrees with
// the engine, or none could be checked.
var errTokenizerCheck = errors.New("tokenizer check failed")

// checkEngine is check --url: for every configured model with a loaded
// tokenizer, it sends the engine a few prompts and compares its
// usage.prompt_tokens with the tokenizer's count, the comparison the
// gateway makes on every response (inferrail_prompt_tokens_mismatch_total).
// Any difference fails the check, as it makes the model's cache predictions
// wrong; a model the engine does not serve is reported and skipped.
func checkEngine(ctx context.Context, cfg *config.Config, models map[string]*tokenize.Model, url string, out io.Writer) error {
	fmt.Fprintf(out, "tokenizers against %s:\n", url)
	var bad []string
	checked := 0
	for _, mc := range cfg.Models {
		m := models[mc.Name]
		if m == nil {
			fmt.Fprintf(out, "  model %s: no tokenizer loaded, not checked\n", mc.Name)
			continue
		}
		count := func(chat bool, body []byte) (int, bool) {
			kind := tokenize.Completion
			if chat {
				kind = tokenize.Chat
			}
			p, err := m.Prepare(kind, body, time.Now())
			return len(p.IDs), err == nil
		}
		samples, err := calibrate.CheckTokens(ctx, calibrate.TokenOptions{URL: url, Model: mc.Name, Count: count, Seed: 1})
		switch {
		case errors.Is(err, calibrate.ErrNotServed):
			fmt.Fprintf(out, "  model %s: not served by the engine, not checked\n", mc.Name)
			continue
		case err != nil:
			return fmt.Errorf("model %s: %w", mc.Name, err)
		}
		checked++
		agree := 0
		var diffs []string
		for _, s := range samples {
			if s.Agrees() {
				agree++
				continue
			}
			kind := "completion"
			if s.Chat {
				kind = "chat"
			}
			diffs = append(diffs, fmt.Sprintf("%s of %s: engine %d, gateway %d", kind, s.Prompt, s.Engine, s.Gateway))
		}
		if len(diffs) == 0 {
			fmt.Fprintf(out, "  model %s: agrees with the engine on %d of %d prompts\n", mc.Name, agree, len(samples))
			continue
		}
		bad = append(bad, mc.Name)
		fmt.Fprintf(out, "  model %s: DISAGREES with the engine on %d of %d prompts (%s); its cache predictions would be wrong: check models[].tokenizer and chat_template\n",
			mc.Name, len(diffs), len(samples), strings.Join(diffs, "; "))
	}
	switch {
	case len(bad) > 0:
		return fmt.Errorf("%w: %s count prompts differently from the engine at %s", errTokenizerCheck, strings.Join(bad, ", "), url)
	case checked == 0:
		return fmt.Errorf("%w: the engine at %s serves no model with a tokenizer to check", errTokenizerCheck, url)
	}
	return nil
}

// checkEvents is check's look at every KV event stream: it warns, one line
// each, about a replica or DNS group whose stream cannot carry a message,
// by kvevents.Meet (exactly one side binds, by the engine's rule; the same
// transport and port) and kvevents.MeetReplay. engines are the values of
// --kv-events-config: the engines' own JSON for every stream, or ID=JSON for
// the replica or group ID. Without one for a stream only what the gateway's
// side settles is checked. Warnings do not fail the check; a value that is
// not a valid --kv-events-config does.
func checkEvents(cfg *config.Config, engines []string, tokenizers []tokenize.Status, out io.Writer) error {
	var all string
	byID := map[string]string{}
	for _, v := range engines {
		if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") {
			all = t
			continue
		}
		id, js, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("--kv-events-config %q: want the engines' JSON or ID=JSON", v)
		}
		byID[id] = js
	}
	type stream struct {
		what, id, engine string
		sub, replay      string
		bind             bool
		model            string // whose blocks the events describe
	}
	var streams []stream
	for _, r := range cfg.Replicas {
		if r.KVEvents != "" {
			streams = append(streams, stream{"replica " + r.ID, r.ID, r.EngineType, r.KVEvents, r.KVEventsReplay, r.KVEventsBind, r.Models[0]})
		}
	}
	for _, g := range cfg.Discovery.DNS {
		if g.KVEventsPort == 0 {
			continue
		}
		at := func(port int) string { return "tcp://MEMBER:" + strconv.Itoa(port) }
		s := stream{what: "discovery.dns " + g.Name, id: g.Name, engine: g.EngineType, sub: at(g.KVEventsPort), model: g.Models[0]}
		if g.KVEventsReplayPort != 0 {
			s.replay = at(g.KVEventsReplayPort)
		}
		streams = append(streams, s)
	}
	// Events feed an index that only prompts mapped to blocks query: a
	// model without a tokenizer maps none of its text prompts.
	for _, st := range tokenizers {
		var who []string
		for _, s := range streams {
			if s.model == st.Model {
				who = append(who, s.what)
			}
		}
		if len(who) > 0 && !st.Loaded() {
			fmt.Fprintf(out, "  model %s: KV events: WARNING: %s follow KV events, but the model has no tokenizer, so "+
				"its text prompts never query what the events store and routing ignores the cache (%s at run time); "+
				"set models[].tokenizer to the engine's tokenizer\n", st.Model, strings.Join(who, ", "),
				replica.WarnEventsNoTokenizer)
		}
	}
	for _, s := range streams {
		js, ok := byID[s.id]
		if !ok {
			js = all
		}
		e := kvevent.Engine(s.engine)
		var problems []string
		if js == "" {
			if err := kvevents.Meet(e, "", s.sub, s.bind); err != nil {
				problems = append(problems, err.Error())
			}
		} else {
			ec, err := kvevents.ParseEngineConfig(e, js)
			if err != nil {
				return fmt.Errorf("--kv-events-config for %s (engine_type %s): %w", s.what, e, err)
			}
			if !ec.EnableKVCacheEvents || ec.Publisher != "zmq" {
				problems = append(problems, "the engine publishes no KV events with this --kv-events-config")
			}
			if err := kvevents.Meet(e, ec.Endpoint, s.sub, s.bind); err != nil {
				problems = append(problems, err.Error())
			}
			if s.replay != "" {
				if err := kvevents.MeetReplay(ec.ReplayEndpoint, s.replay); err != nil {
					problems = append(problems, "replay: "+err.Error())
				}
			}
		}
		for _, p := range problems {
			fmt.Fprintf(out, "  %s: KV events: WARNING: %s\n", s.what, p)
		}
		if len(problems) == 0 && js != "" {
			fmt.Fprintf(out, "  %s: KV events: the engine's endpoint and the gateway's can meet\n", s.what)
		}
	}
	return nil
}
