package tokenize

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prefix"
)

const (
	commitMain = "0123456789abcdef0123456789abcdef01234567"
	commitV1   = "89abcdef0123456789abcdef0123456789abcdef"
)

// hubCache lays out a Hugging Face hub cache as huggingface_hub writes it:
// blobs, refs/<branch or tag> holding a commit, and snapshots/<commit>/
// whose files are symlinks into blobs. Qwen/Qwen3-0.6B has main (full) and
// the tag v1 (no tokenizer_config.json); Org/Broken has a snapshot without
// tokenizer.json. mistralai/Mistral-7B-v0.1 is the smaller Mistral
// tokenizer, quicker to load.
func hubCache(t *testing.T) string {
	t.Helper()
	hub := t.TempDir()
	put := func(repo, commit, name string, data []byte) {
		base := filepath.Join(hub, "models--"+strings.ReplaceAll(repo, "/", "--"))
		blob := filepath.Join(base, "blobs", commit+"-"+name)
		snap := filepath.Join(base, "snapshots", commit)
		for _, d := range []string{filepath.Dir(blob), snap} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(blob, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", commit+"-"+name), filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	ref := func(repo, name, commit string) {
		p := filepath.Join(hub, "models--"+strings.ReplaceAll(repo, "/", "--"), "refs", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(commit), 0o644); err != nil { // no newline, as huggingface_hub writes it
			t.Fatal(err)
		}
	}
	tj, cfg := readFile(t, qwenDir+"/tokenizer.json"), readFile(t, qwenDir+"/tokenizer_config.json")
	put("Qwen/Qwen3-0.6B", commitMain, "tokenizer.json", tj)
	put("Qwen/Qwen3-0.6B", commitMain, "tokenizer_config.json", cfg)
	put("Qwen/Qwen3-0.6B", commitV1, "tokenizer.json", tj)
	ref("Qwen/Qwen3-0.6B", "main", commitMain)
	ref("Qwen/Qwen3-0.6B", "v1", commitV1)
	put("mistralai/Mistral-7B-v0.1", commitMain, "tokenizer.json", readFile(t, mistralDir+"/tokenizer.json"))
	put("mistralai/Mistral-7B-v0.1", commitMain, "tokenizer_config.json", readFile(t, mistralDir+"/tokenizer_config.json"))
	ref("mistralai/Mistral-7B-v0.1", "main", commitMain)
	put("Org/Broken", commitMain, "config.json", []byte(`{}`))
	ref("Org/Broken", "main", commitMain)
	return hub
}

func TestLoadHubCache(t *testing.T) {
	hub := hubCache(t)
	snap := func(commit string) string {
		return filepath.Join(hub, "models--Qwen--Qwen3-0.6B", "snapshots", commit)
	}
	ok := func(spec, dir string) {
		t.Helper()
		got, err := resolve(spec, hub)
		if err != nil || got != dir {
			t.Fatalf("%s: %s, %v; want %s", spec, got, err, dir)
		}
	}
	ok("Qwen/Qwen3-0.6B", snap(commitMain))
	ok("Qwen/Qwen3-0.6B@main", snap(commitMain))
	ok("Qwen/Qwen3-0.6B@v1", snap(commitV1))
	ok("Qwen/Qwen3-0.6B@"+commitV1, snap(commitV1))
	ok(snap(commitMain), snap(commitMain)) // a directory
	m, err := Load(config.Model{Name: "m", Tokenizer: "mistralai/Mistral-7B-v0.1"}, hub, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Dir != filepath.Join(hub, "models--mistralai--Mistral-7B-v0.1", "snapshots", commitMain) || m.Kind != "tokenizer.json" ||
		m.VocabSize != 32000 || m.ChatTemplate || m.BlockSize != 16 {
		t.Fatalf("%+v", m)
	}

	fail := func(spec, want string) {
		t.Helper()
		_, err := Load(config.Model{Name: "m", Tokenizer: spec}, hub, 0)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "model m: tokenizer "+spec+": ") {
			t.Fatalf("%s: error %v, want one containing %q", spec, err, want)
		}
	}
	fail("Qwen/Qwen3-8B", "is not in the Hugging Face cache")
	fail("Qwen/Qwen3-0.6B@v2", "revision v2 of Qwen/Qwen3-0.6B is not in the Hugging Face cache")
	fail("Qwen/Qwen3-0.6B@fedcba9876543210fedcba9876543210fedcba98", "no snapshot")
	fail("Org/Broken", "no tokenizer.json in "+filepath.Join(hub, "models--Org--Broken", "snapshots", commitMain))
	fail("/no/such/dir", "no such directory")
	fail(qwenDir+"/tokenizer.json", "is a file")
	fail("builtin:gpt", "unknown builtin tokenizer")
	if _, err := Load(config.Model{Name: "m"}, hub, 0); !errors.Is(err, ErrNoTokenizer) {
		t.Fatalf("no tokenizer: %v", err)
	}
	if _, err := Load(config.Model{Name: "m", Tokenizer: "Qwen/Qwen3-0.6B"}, "", 0); err == nil || !strings.Contains(err.Error(), "no Hugging Face cache") {
		t.Fatalf("no hub: %v", err)
	}
}

func TestHubCache(t *testing.T) {
	f := func(env map[string]string, want string) {
		t.Helper()
		if got := HubCache(func(k string) string { return env[k] }, "/home/u"); got != want {
			t.Errorf("HubCache(%v) = %s, want %s", env, got, want)
		}
	}
	f(nil, "/home/u/.cache/huggingface/hub")
	f(map[string]string{"XDG_CACHE_HOME": "/xdg"}, "/xdg/huggingface/hub")
	f(map[string]string{"HF_HOME": "~/hf", "XDG_CACHE_HOME": "/xdg"}, "/home/u/hf/hub")
	f(map[string]string{"HF_HUB_CACHE": "/hub", "HF_HOME": "/hf"}, "/hub")
	f(map[string]string{"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/hf"}, "/old")
}

// TestLoadChatTemplate: config overrides of the chat template, as a file or
// inline, and chat_template.jinja beside the tokenizer, keep the
// tokenizer_config's special tokens; chat_template_kwargs and block_size
// apply.
func TestLoadChatTemplate(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(mustAbs(t, mistralDir), name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	body := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	render := func(mc config.Model) string {
		t.Helper()
		mc.Name = "m"
		m, err := Load(mc, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Prepare(Chat, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p.Text
	}
	if got := render(config.Model{Tokenizer: dir, ChatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}\n"}); got != "hi</s>" {
		t.Fatalf("inline override: %q", got)
	}
	file := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(file, []byte("F:{{ messages[0].content }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := render(config.Model{Tokenizer: dir, ChatTemplate: file}); got != "F:hi" {
		t.Fatalf("file override: %q", got)
	}
	bad, err := Load(config.Model{Name: "m", Tokenizer: dir, ChatTemplate: "{% if %}\n"}, "", 0)
	if err != nil || bad.ChatTemplate || bad.TemplateErr == nil {
		t.Fatalf("a template that does not compile: %+v, %v", bad, err)
	}
	if _, err := bad.Prepare(Completion, []byte(`{"prompt":"still works"}`), time.Now()); err != nil {
		t.Fatalf("completion with a broken template: %v", err)
	}
	if _, err := Load(config.Model{Name: "m", Tokenizer: dir, ChatTemplate: "/no/such.jinja"}, "", 0); err == nil ||
		!strings.Contains(err.Error(), "looks like a file path") {
		t.Fatalf("missing template file: %v", err)
	}
	kw := config.Model{Tokenizer: dir, ChatTemplate: "{{ 'T' if enable_thinking else 'F' }}{{ n }}\n", ChatTemplateKwargs: map[string]any{"enable_thinking": false, "n": 3}}
	if got := render(kw); got != "F3" {
		t.Fatalf("chat_template_kwargs: %q", got)
	}
	if _, err := Load(config.Model{Name: "m", Tokenizer: dir}, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("J:{{ bos_token }}{{ messages[0].content }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := render(config.Model{Tokenizer: dir}); got != "J:<s>hi" {
		t.Fatalf("chat_template.jinja: %q", got)
	}
	m, err := Load(config.Model{Name: "m", Tokenizer: dir, BlockSize: 4}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Prepare(Completion, []byte(`{"prompt":"one two three four five six seven eight nine"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var h prefix.Hasher
	if want := h.Chain(nil, prefix.Root("m", "", ""), p.IDs, 4); len(p.Blocks) != len(p.IDs)/4 || !slices.Equal(p.Blocks, want) {
		t.Fatalf("block size 4: %d blocks of %d ids", len(p.Blocks), len(p.IDs))
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLoadAllStatus(t *testing.T) {
	hub := hubCache(t)
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "mistral", Tokenizer: "mistralai/Mistral-7B-v0.1", BlockSize: 16},
		{Name: "sim", Tokenizer: Sim, BlockSize: 16},
		{Name: "none", BlockSize: 16},
		{Name: "broken", Tokenizer: "Org/Broken", BlockSize: 16},
	}
	models, st := LoadAll(cfg, hub)
	if len(models) != 2 || models["mistral"] == nil || models["sim"] == nil || len(st) != 4 {
		t.Fatalf("models %v, statuses %v", models, st)
	}
	want := []string{
		"model mistral: tokenizer loaded (tokenizer.json from " + filepath.Join(hub, "models--mistralai--Mistral-7B-v0.1", "snapshots", commitMain) +
			", vocab size 32000, block size 16, no chat template: chat requests are not predicted)",
		"model sim: tokenizer loaded (builtin:sim, vocab size 32000, block size 16)",
		"model none: no tokenizer configured; its text prompts route without cache predictions (prompts of token ids are still predicted)",
		"model broken: tokenizer Org/Broken: no tokenizer.json in " + filepath.Join(hub, "models--Org--Broken", "snapshots", commitMain) +
			"; its text prompts route without cache predictions (prompts of token ids are still predicted)",
	}
	for i, s := range st {
		if s.String() != want[i] {
			t.Errorf("status %d:\n got %s\nwant %s", i, s, want[i])
		}
	}
	if !st[0].Loaded() || st[2].Loaded() || st[3].Loaded() || st[3].Err == nil {
		t.Fatalf("Loaded/Err: %+v", st)
	}
	cfg.Models = []config.Model{{Name: "bad", Tokenizer: "mistralai/Mistral-7B-v0.1", ChatTemplate: "{% if %}\n", BlockSize: 16}}
	_, st = LoadAll(cfg, hub)
	if s := st[0].String(); !st[0].Loaded() || !strings.Contains(s, "block size 16, chat requests are not predicted: model bad: chat template: ") {
		t.Fatalf("broken template: %s", s)
	}
}
