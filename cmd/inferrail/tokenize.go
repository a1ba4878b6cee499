package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// runTokenize prints what the engine will compute for a request: the
// rendered prompt, its token ids and its block hashes. It is the tool for
// debugging a mismatch with an engine.
func runTokenize(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail tokenize", flag.ContinueOnError)
	spec := fs.String("tokenizer", "", "model directory holding tokenizer.json (and tokenizer_config.json), org/name[@revision] in the local Hugging Face cache, or builtin:sim (required)")
	chat := fs.Bool("chat", false, "stdin is a /v1/chat/completions body; otherwise it is plain text, tokenized as a completion prompt")
	model := fs.String("model", "", "model name that salts the block hashes, as the gateway's config names it")
	blockSize := fs.Int("block-size", 16, "tokens per KV block")
	salt := fs.String("cache-salt", "", "cache_salt for a plain-text prompt (a chat body carries its own)")
	tmpl := fs.String("chat-template", "", "chat template file or text overriding the tokenizer's, as the config's chat_template")
	if err := parseFlags(fs, args, stderr, "inferrail tokenize --tokenizer DIR|ORG/NAME[@REV]|builtin:sim [--chat] < body-or-text"); err != nil {
		return err
	}
	if *spec == "" {
		fmt.Fprintln(stderr, "--tokenizer is required")
		return errUsage
	}
	home, _ := os.UserHomeDir()
	m, err := tokenize.Load(config.Model{Name: *model, Tokenizer: *spec, BlockSize: *blockSize, ChatTemplate: *tmpl,
		ChatTemplateContentFormat: "auto"}, tokenize.HubCache(os.Getenv, home), 0)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	if err != nil {
		return err
	}
	var out prompt.Prompt
	if *chat {
		if out, err = m.Prepare(tokenize.Chat, in, time.Now()); err != nil {
			return err
		}
	} else {
		out = m.Preparer().Text(string(in), *salt)
	}
	hashes := make([]string, len(out.Blocks))
	for i, h := range out.Blocks {
		var b [16]byte
		for k := 0; k < 8; k++ {
			b[k] = byte(h.Hi >> (56 - 8*k))
			b[8+k] = byte(h.Lo >> (56 - 8*k))
		}
		hashes[i] = hex.EncodeToString(b[:])
	}
	ids := out.IDs
	if ids == nil {
		ids = []uint32{}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Prompt      string   `json:"prompt"`
		TokenIDs    []uint32 `json:"token_ids"`
		Tokens      int      `json:"tokens"`
		BlockSize   int      `json:"block_size"`
		BlockHashes []string `json:"block_hashes"`
	}{out.Text, ids, len(ids), *blockSize, hashes})
}
