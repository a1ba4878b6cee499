// One fixed, sequential workload through the official openai SDK, streamed
// with usage, whose cached-token counts are written to OUT as JSON. Run
// twice on the same traffic (through a gateway, and through EPP mode behind
// a proxy that plays Envoy) so that a Go test can compare the hit rates:
// cmd/inferrail's TestEPPMatchesStandalone starts both and runs this.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import OpenAI from 'openai';

const baseURL = process.env.BASE_URL;
const model = process.env.MODEL ?? 'sim';
const out = process.env.OUT;
const requests = Number(process.env.REQUESTS ?? 60);
assert.ok(baseURL, 'BASE_URL must be set');
assert.ok(out, 'OUT must be set');
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });

// Six long system prompts, each shared by a tenth of the requests, so that
// a cache-aware router has something to find.
function systemPrompt(i) {
  const words = [];
  for (let w = 0; w < 400; w++) words.push(`tenant${i}-rule${w % 37}-${(w * 7 + i) % 101}`);
  return `You are assistant number ${i}. ${words.join(' ')}`;
}

test('a fixed workload, streamed with usage', async () => {
  const results = [];
  for (let n = 0; n < requests; n++) {
    const tenant = (n * 5) % 6;
    const { data: stream, response } = await client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: systemPrompt(tenant) },
        { role: 'user', content: `Question ${n}: what is ${n} squared?` },
      ],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    }).withResponse();
    let usage = null, text = '';
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) text += c.delta?.content ?? '';
    }
    assert.ok(usage, `request ${n}: no usage chunk`);
    assert.ok(text.length > 0, `request ${n}: no text`);
    const predicted = response.headers.get('x-inferrail-cached-tokens');
    results.push({
      replica: response.headers.get('x-inferrail-replica'),
      predicted: predicted === null ? -1 : Number(predicted),
      prompt_tokens: usage.prompt_tokens,
      cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    });
  }
  writeFileSync(out, JSON.stringify(results));
});
