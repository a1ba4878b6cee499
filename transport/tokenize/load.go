package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/template"
	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/model/token/hf"
)

// Sim is the tokenizer setting of the simulator's built-in tokenizer.
const Sim = "builtin:sim"

// ErrNoTokenizer means a model has no tokenizer configured: its
// text prompts route without cache predictions.
var ErrNoTokenizer = errors.New("no tokenizer configured")

// Model is one model's tokenizer, chat template and block size, loaded. It
// is immutable and safe for concurrent use; its piece cache, if any, is a
// concurrent structure of its own.
type Model struct {
	Name      string // the configured model name, which salts the block hashes
	Tokenizer string // the tokenizer setting it was loaded from
	Kind      string // "tokenizer.json" or "builtin:sim"
	Dir       string // the directory read; "" for builtin:sim
	VocabSize int
	// ChatTemplate tells whether chat requests can be predicted: the
	// tokenizer (or config) has a chat template. builtin:sim always has one.
	ChatTemplate bool
	// TemplateErr is why the chat template did not compile, if it did not;
	// completions are still predicted.
	TemplateErr error
	BlockSize   int
	// GenerationConfig tells that the directory holds a
	// generation_config.json. vLLM's default --generation-config auto
	// takes sampling defaults from it (temperature, top_p, ...) and puts
	// them in a render answer's sampling_params, which the gateway does
	// not reproduce: such a model's render requests go to an engine.
	GenerationConfig bool

	prep *prompt.Preparer
}

// Preparer returns the model's Preparer, for callers that prepare
// requests themselves (inferrail tokenize).
func (m *Model) Preparer() *prompt.Preparer { return m.prep }

// Decode returns the text of ids as the engine's POST /detokenize gives
// it: the tokenizer's decode with special tokens kept, or the simulator's
// (token.Sim.Decode) for builtin:sim. ok is false when the gateway cannot
// reproduce the engine's decoding (hf.Tokenizer.DecodeText).
func (m *Model) Decode(ids []uint32) (text string, ok bool) {
	if m.prep.Sim {
		return token.Sim{}.Decode(ids), true
	}
	return m.prep.Tokenizer.DecodeText(ids)
}

// Kind of a request body.
type Kind uint8

const (
	Chat        Kind = iota + 1 // a /v1/chat/completions body
	Completion                  // a /v1/completions body
	Messages                    // an Anthropic /v1/messages body
	CountTokens                 // an Anthropic /v1/messages/count_tokens body
	Responses                   // an OpenAI /v1/responses body
	Tokenize                    // a /tokenize body (prompt.Preparer.Tokenize)
)

// Prepare prepares one request body synchronously. now is the clock the
// chat template's strftime_now reads. Errors wrap prompt.ErrUnsupported
// for requests that cannot be predicted.
func (m *Model) Prepare(kind Kind, body []byte, now time.Time) (prompt.Prompt, error) {
	switch kind {
	case Chat:
		return m.prep.Chat(body, now)
	case Completion:
		return m.prep.Completion(body)
	case Messages, CountTokens:
		return m.prep.Messages(body, kind == CountTokens, now)
	case Responses:
		return m.prep.Responses(body, now)
	case Tokenize:
		return m.prep.Tokenize(body, now)
	}
	return prompt.Prompt{}, fmt.Errorf("tokenize: unknown request kind %d", kind)
}

// HubCache is the Hugging Face hub cache directory huggingface_hub uses:
// $HF_HUB_CACHE (or the older $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub,
// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
// getenv is os.Getenv and home the user's home directory; only cmd/ reads
// the environment.
func HubCache(getenv func(string) string, home string) string {
	expand := func(p string) string {
		if p == "~" {
			return home
		}
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			return filepath.Join(home, rest)
		}
		return p
	}
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if v := getenv(k); v != "" {
			return expand(v)
		}
	}
	if v := getenv("HF_HOME"); v != "" {
		return filepath.Join(expand(v), "hub")
	}
	if v := getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(expand(v), "huggingface", "hub")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// Load loads the tokenizer of one configured model: a model directory
// holding tokenizer.json (and tokenizer_config.json for the chat template
// and special tokens, chat_template.jinja if present), a repository already
// in the Hugging Face cache at hubCache given as org/name or
// org/name@revision, or builtin:sim. Nothing is downloaded. The model's
// chat_template, chat_template_content_format, chat_template_kwargs and
// block_size apply. cacheTokens sizes its piece cache (0: none). A model
// without a tokenizer gives ErrNoTokenizer; every error names the model and
// the setting.
func Load(m config.Model, hubCache string, cacheTokens int) (*Model, error) {
	out, err := load(m, hubCache, cacheTokens)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, ErrNoTokenizer):
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	case m.Name == "":
		return nil, fmt.Errorf("tokenizer %s: %w", m.Tokenizer, err)
	}
	return nil, fmt.Errorf("model %s: tokenizer %s: %w", m.Name, m.Tokenizer, err)
}

func load(m config.Model, hubCache string, cacheTokens int) (*Model, error) {
	bs := m.BlockSize
	if bs <= 0 {
		bs = 16
	}
	out := &Model{Name: m.Name, Tokenizer: m.Tokenizer, BlockSize: bs}
	switch {
	case m.Tokenizer == "":
		return nil, ErrNoTokenizer
	case m.Tokenizer == Sim:
		out.Kind, out.VocabSize, out.ChatTemplate = Sim, token.VocabSize, true
		out.prep = &prompt.Preparer{Model: m.Name, BlockSize: bs, Sim: true, InlineSystem: inlineMode(m)}
		return out, nil
	case strings.HasPrefix(m.Tokenizer, "builtin:"):
		return nil, errors.New("unknown builtin tokenizer; the only one is builtin:sim")
	}
	dir, err := resolve(m.Tokenizer, hubCache)
	if err != nil {
		return nil, err
	}
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no tokenizer.json in %s", dir)
	}
	if err != nil {
		return nil, err
	}
	cfg, err := readOptional(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	tok, err := hf.Load(tj, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer.json"), err)
	}
	// transformers reads chat_template.jinja over tokenizer_config.json's
	// chat_template ("clobbers any template in the config"); vLLM's
	// --chat-template overrides both.
	src, err := readOptional(filepath.Join(dir, "chat_template.jinja"))
	if err != nil {
		return nil, err
	}
	override := string(src)
	if m.ChatTemplate != "" {
		if override, err = chatTemplate(m.ChatTemplate); err != nil {
			return nil, err
		}
	}
	// A template this package cannot compile costs chat predictions only:
	// completions still tokenize.
	chat, templateErr := newChat(cfg, override, src != nil || m.ChatTemplate != "")
	kwargs, err := kwargsDict(m.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	p := &prompt.Preparer{Model: m.Name, Tokenizer: tok, Template: chat, BlockSize: bs, Kwargs: kwargs,
		ContentFormat: m.ChatTemplateContentFormat, InlineSystem: inlineMode(m)}
	if p.ContentFormat == "" {
		p.ContentFormat = "auto"
	}
	if cacheTokens > 0 {
		p.Cache = tok.NewCache(cacheTokens)
	}
	if chat != nil {
		// Once per model, as vLLM probes its template once per server.
		p.DisabledThinkingEffort = p.ResolveDisabledThinkingEffort(time.Now())
	}
	if _, err := os.Stat(filepath.Join(dir, "generation_config.json")); err == nil {
		out.GenerationConfig = true
	}
	out.Kind, out.Dir, out.VocabSize, out.ChatTemplate, out.prep = "tokenizer.json", dir, tok.VocabSize(), chat != nil, p
	if templateErr != nil {
		out.TemplateErr = fmt.Errorf("model %s: chat template: %w", m.Name, templateErr)
	}
	return out, nil
}

// inlineMode is the model's anthropic_inline_system.
func inlineMode(m config.Model) anthropic.InlineMode {
	if m.AnthropicInlineSystem == "fold" {
		return anthropic.Fold
	}
	return anthropic.Preserve
}

// repoID is a Hugging Face repository id, org/name, with an optional
// @revision (a branch, a tag or a commit hash).
var repoID = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)(?:@(.+))?$`)

// commitHash is a full git commit hash, the name of a snapshot directory.
var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolve finds the directory of a tokenizer setting: an existing
// directory, as transformers tries first, else a repository snapshot in
// the hub cache (hub/models--org--name/snapshots/<commit>, the commit read
// from refs/<revision>, revision main by default).
func resolve(spec, hub string) (string, error) {
	if st, err := os.Stat(spec); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("%s is a file; give the directory holding tokenizer.json", spec)
		}
		return spec, nil
	}
	sm := repoID.FindStringSubmatch(spec)
	if sm == nil {
		return "", fmt.Errorf("no such directory, and not a Hugging Face repository id (org/name or org/name@revision)")
	}
	repo := sm[1] + "/" + sm[2]
	rev := sm[3]
	if rev == "" {
		rev = "main"
	}
	if hub == "" {
		return "", fmt.Errorf("no such directory, and no Hugging Face cache directory to look for %s in", repo)
	}
	base := filepath.Join(hub, "models--"+sm[1]+"--"+sm[2])
	if _, err := os.Stat(base); err != nil {
		return "", fmt.Errorf("%s is not in the Hugging Face cache (no %s); nothing is downloaded: fetch it first, e.g. `hf download %s`", repo, base, repo)
	}
	commit := ""
	if b, err := os.ReadFile(filepath.Join(base, "refs", filepath.FromSlash(rev))); err == nil {
		commit = strings.TrimSpace(string(b))
	} else if commitHash.MatchString(rev) {
		commit = rev
	} else {
		return "", fmt.Errorf("revision %s of %s is not in the Hugging Face cache (no %s)", rev, repo, filepath.Join(base, "refs", rev))
	}
	if !commitHash.MatchString(commit) {
		return "", fmt.Errorf("revision %s of %s: %s does not hold a commit hash", rev, repo, filepath.Join(base, "refs", rev))
	}
	snap := filepath.Join(base, "snapshots", commit)
	if _, err := os.Stat(snap); err != nil {
		return "", fmt.Errorf("revision %s of %s: no snapshot %s in the Hugging Face cache", rev, repo, snap)
	}
	return snap, nil
}

// readOptional reads a file, nil if it does not exist.
func readOptional(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// chatTemplate reads a chat_template setting as vLLM's load_chat_template
// reads --chat-template: a file if one opens, else the template itself when
// it looks like one (holds '{', '}' or a newline). vLLM also decodes
// backslash escapes in a template given on its command line; a config file
// has its own quoting, so the text is taken as it is.
func chatTemplate(s string) (string, error) {
	b, err := os.ReadFile(s)
	if err == nil {
		return string(b), nil
	}
	if !strings.ContainsAny(s, "{}\n") {
		return "", fmt.Errorf("chat_template %q looks like a file path, but it cannot be read: %w", s, err)
	}
	return s, nil
}

// newChat builds the chat template from tokenizer_config.json (its special
// tokens, and its chat_template unless overridden). No template at all
// gives nil: chat requests then cannot be predicted.
func newChat(cfg []byte, override string, overridden bool) (*template.Chat, error) {
	if overridden {
		fields := map[string]json.RawMessage{}
		if len(cfg) > 0 {
			if err := json.Unmarshal(cfg, &fields); err != nil {
				return nil, fmt.Errorf("tokenizer_config.json: %w", err)
			}
		}
		src, _ := json.Marshal(override)
		fields["chat_template"] = src
		var err error
		if cfg, err = json.Marshal(fields); err != nil {
			return nil, err
		}
	}
	if len(cfg) == 0 {
		return nil, nil
	}
	chat, err := template.NewChat(cfg)
	if errors.Is(err, template.ErrNoChatTemplate) {
		return nil, nil
	}
	return chat, err
}

// kwargsDict turns chat_template_kwargs into a template dict, keys sorted.
func kwargsDict(kw map[string]any) (*template.Dict, error) {
	if len(kw) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(kw))
	for k := range kw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := template.NewDict(len(keys))
	for _, k := range keys {
		v, err := template.FromGo(kw[k])
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		d.SetString(k, v)
	}
	return d, nil
}

// Status is how a model's tokenizer loaded, for startup logs and
// inferrail check.
type Status struct {
	Model     string // the configured model name
	Tokenizer string // its tokenizer setting; "" when none
	Kind      string // "tokenizer.json" or "builtin:sim" once loaded
	Dir       string // the directory read
	VocabSize int
	// ChatTemplate tells whether chat requests can be predicted.
	ChatTemplate bool
	TemplateErr  error // why the chat template did not compile, if it did not
	BlockSize    int   // as configured (0: 16) when the tokenizer did not load
	Err          error // why it did not load; nil when loaded or not configured
}

// noTokenizerEffect is what a model without a tokenizer loses: the gateway
// maps a prompt to blocks by tokenizing it, except a prompt already of token
// ids (a completion's), which it hashes as it is.
const noTokenizerEffect = "its text prompts route without cache predictions (prompts of token ids are still predicted)"

// Loaded reports whether the tokenizer loaded.
func (s Status) Loaded() bool { return s.Kind != "" }

func (s Status) String() string {
	switch {
	case s.Err != nil:
		return s.Err.Error() + "; " + noTokenizerEffect
	case !s.Loaded():
		return "model " + s.Model + ": no tokenizer configured; " + noTokenizerEffect
	}
	msg := fmt.Sprintf("model %s: tokenizer loaded (%s", s.Model, s.Kind)
	if s.Dir != "" {
		msg += " from " + s.Dir
	}
	msg += fmt.Sprintf(", vocab size %d, block size %d", s.VocabSize, s.BlockSize)
	switch {
	case s.TemplateErr != nil:
		msg += fmt.Sprintf(", chat requests are not predicted: %v", s.TemplateErr)
	case !s.ChatTemplate:
		msg += ", no chat template: chat requests are not predicted"
	}
	return msg + ")"
}

// LoadAll loads the tokenizer of every configured model, in config order.
// models holds the ones that loaded, by name; statuses has one entry per
// model, loaded, failed or not configured.
func LoadAll(cfg *config.Config, hubCache string) (models map[string]*Model, statuses []Status) {
	models = make(map[string]*Model, len(cfg.Models))
	for _, mc := range cfg.Models {
		st := Status{Model: mc.Name, Tokenizer: mc.Tokenizer, BlockSize: mc.BlockSize}
		m, err := Load(mc, hubCache, cfg.Tokenizer.CacheTokens)
		switch {
		case errors.Is(err, ErrNoTokenizer):
		case err != nil:
			st.Err = err
		default:
			models[mc.Name] = m
			st.Kind, st.Dir, st.VocabSize, st.ChatTemplate, st.TemplateErr, st.BlockSize = m.Kind, m.Dir, m.VocabSize, m.ChatTemplate, m.TemplateErr, m.BlockSize
		}
		statuses = append(statuses, st)
	}
	return models, statuses
}
