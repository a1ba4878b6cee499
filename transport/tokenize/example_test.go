package tokenize_test

import (
	"context"
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/tokenize"
)

func ExamplePool_Prepare() {
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "inferrail/sim-8b", Tokenizer: tokenize.Sim, BlockSize: 16},
		{Name: "other", BlockSize: 16},
	}
	p := tokenize.New(cfg, "", metrics.NewSet())
	defer p.Close()
	for _, st := range p.Status() {
		fmt.Println(st)
	}
	body := []byte(`{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Name three prime numbers."}]}`)
	pr, r := p.Prepare(context.Background(), "inferrail/sim-8b", tokenize.Chat, body)
	fmt.Println(r, len(pr.IDs), "tokens,", len(pr.Blocks), "full blocks")
	_, r = p.Prepare(context.Background(), "other", tokenize.Chat, body)
	fmt.Println(r)
	// Output:
	// model inferrail/sim-8b: tokenizer loaded (builtin:sim, vocab size 32000, block size 16)
	// model other: no tokenizer configured; its text prompts route without cache predictions (prompts of token ids are still predicted)
	// ok 30 tokens, 1 full blocks
	// unavailable
}
