package frontend

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// The rule for a tokenizer that does not count as the engine does.
//
// vLLM's usage.prompt_tokens is len(prompt_token_ids), the very ids the
// engine computed (serving_chat.py and serving_completion.py; plus the
// encoder prompt's for encoder-decoder models, and multimodal placeholders
// expanded, neither of which the gateway predicts). For a request the
// gateway tokenized, the two counts are equal when its tokenizer and chat
// template are the engine's, so any difference is a mismatch: no slack is
// allowed. One odd prompt does not make a wrong tokenizer, though, so the
// warning waits for promptCheckMin comparisons on a (replica, model) and
// is raised when more than one in promptMismatchRatio of them disagree. A
// wrong tokenizer (builtin:sim in front of a real model, another model's
// tokenizer) disagrees on nearly every prompt.
const (
	promptCheckMin      = 8
	promptMismatchRatio = 10
)

// tokenizerDisagrees applies the rule to a (replica, model)'s counts.
func tokenizerDisagrees(checked, mismatched uint64) bool {
	return checked >= promptCheckMin && mismatched*promptMismatchRatio > checked
}

// checkPrompt compares the engine's usage.prompt_tokens for r, served by
// replicaID, with the gateway's own count (CheckPrompt).
func (s *Server) checkPrompt(r *request, replicaID string, series *telemetry.Series, engine int) {
	CheckPrompt(s.fleet, s.log, r.model, replicaID, series, r.policy.PromptTokens, engine)
}

// CheckPrompt compares engine, the engine's usage.prompt_tokens for a
// request to model served by replicaID, with gateway, the gateway's own
// count of the prompt, counts the comparison on series.Prompt, and when the
// rule says the tokenizer disagrees raises WarnTokenizerMismatch on the
// replica once, with both numbers; and WarnCapacityUnits too when the
// replica's index is sized by the engine's reported capacity, which is in
// the engine's tokens. The gateway and the endpoint picker check so.
func CheckPrompt(fl *fleet.Fleet, log *slog.Logger, model, replicaID string, series *telemetry.Series, gateway, engine int) {
	pc := series.Prompt
	pc.Checked.Inc()
	if engine == gateway {
		return
	}
	pc.Mismatched.Inc()
	checked, mismatched := pc.Checked.Get(), pc.Mismatched.Get()
	if !tokenizerDisagrees(checked, mismatched) {
		return
	}
	snap, ok := fl.Snapshot(replicaID)
	if !ok || snap.Warnings.Active(replica.WarnTokenizerMismatch) {
		return // told already; skip building the message
	}
	now := time.Now()
	msg := fmt.Sprintf("model %s: the engine counted %d prompt tokens where the gateway's tokenizer counted %d; "+
		"%d of %d prompts checked on this replica disagree, so its cache predictions are wrong: "+
		"check models[].tokenizer and chat_template against the model the engine serves",
		model, engine, gateway, mismatched, checked)
	if !snap.Warnings.RaiseNew(log, now, replica.WarnTokenizerMismatch, msg, "replica", replicaID, "model", model,
		"engine_prompt_tokens", engine, "gateway_prompt_tokens", gateway) {
		return // another request raised it first
	}
	if snap.CapacityFromEngine() {
		_, capacity, _ := snap.Shadow.Index()
		msg := fmt.Sprintf("the index capacity (%d blocks) comes from the engine's metrics, counted in the engine's tokens, "+
			"which the gateway's tokenizer counts differently (%d against %d for one prompt): the index may be mis-sized; "+
			"fix the tokenizer, or set replicas[].kv_capacity_blocks", capacity, engine, gateway)
		snap.Warnings.RaiseNew(log, now, replica.WarnCapacityUnits, msg, "replica", replicaID, "model", model)
	}
}

// Account compares the engine's usage for a committed response of decision
// d (u, read when found) with d's prediction, when the KV index priced d:
// inferrail_prediction_total, inferrail_prediction_error_tokens and
// inferrail_delivered_cached_tokens_total. prompt is the gateway's count of
// the prompt. The gateway and the endpoint picker call it once per
// committed response, so that every prediction counted in
// inferrail_predicted_cached_tokens_total gets one result. When the
// engine has sent a (replica, model) usage noDetailsMin times and never
// with prompt_tokens_details, it raises WarnNoCachedTokens on the replica;
// the first usage with them clears it. The engine's cached tokens also go
// to the replica (fleet.Decision.ReportCached), to confirm the prediction
// behind its online fit's sample.
func Account(fl *fleet.Fleet, log *slog.Logger, met *telemetry.Model, series *telemetry.Series, d fleet.Decision, prompt int,
	u openai.Usage, found bool) {
	if !d.Predicted {
		return
	}
	if found && u.Details {
		d.ReportCached(u.CachedTokens)
	}
	p := series.Prediction
	p.Compare(met, prompt, d.CachedTokens, u, found)
	if !found {
		return
	}
	read, detailed := p.Usages()
	raise := !u.Details && detailed == 0 && read == noDetailsMin
	clear := u.Details && detailed == 1 && read > 1
	if !raise && !clear {
		return
	}
	snap, ok := fl.Snapshot(d.Replica)
	if !ok {
		return
	}
	if clear {
		snap.Warnings.Clear(log, replica.WarnNoCachedTokens)
		return
	}
	snap.Warnings.RaiseNew(log, time.Now(), replica.WarnNoCachedTokens, fmt.Sprintf(
		"%d responses' usage carried no prompt_tokens_details.cached_tokens, so whether the cache predictions are right "+
			"is unknown: start vLLM with --enable-prompt-tokens-details", read), "replica", d.Replica, "model", met.Name())
}

// noDetailsMin is how many usages without prompt_tokens_details, and none
// with, raise WarnNoCachedTokens.
const noDetailsMin = 8
