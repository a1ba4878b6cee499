package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/calibrate"
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
