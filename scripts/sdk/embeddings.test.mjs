// The official openai npm SDK's embeddings.create, unchanged, against
// `inferrail sim` or through the gateway (load-aware routing, no cache
// prediction): one input and a batch, in the SDK's default encoding
// (base64, which it decodes) and as floats, and errors. Run by
// scripts/sdk-test.sh, which starts the servers and sets the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, gateway, model, responseModel } from './env.mjs';

test('embeddings.create, the SDK\'s default encoding (base64): one vector, decoded, with usage', async () => {
  const { data: r, response } = await client.embeddings.create({ model, input: 'The quick brown fox' }).withResponse();
  assert.equal(r.object, 'list');
  assert.equal(r.model, responseModel);
  assert.equal(r.data.length, 1);
  assert.equal(r.data[0].index, 0);
  assert.equal(r.data[0].object, 'embedding');
  assert.ok(r.data[0].embedding.length > 0);
  assert.ok(Array.from(r.data[0].embedding).every((v) => Number.isFinite(v) && Math.abs(v) <= 1));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
  if (gateway) {
    assert.ok(response.headers.get('x-inferrail-replica'), 'no x-inferrail-replica');
    assert.equal(response.headers.get('x-inferrail-cached-tokens'), null, 'an embedding has no cache prediction');
  }
});

test('embeddings.create, a batch, as floats: one vector per input, in order, the same as base64 gives', async () => {
  const input = ['alpha beta', 'gamma delta epsilon', 'alpha beta'];
  const floats = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.deepEqual(floats.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(floats.data.every((d) => Array.isArray(d.embedding)));
  assert.deepEqual(floats.data[0].embedding, floats.data[2].embedding, 'the same input, the same vector');
  assert.notDeepEqual(floats.data[0].embedding, floats.data[1].embedding);
  const decoded = await client.embeddings.create({ model, input });
  for (let i = 0; i < input.length; i++) {
    assert.deepEqual(Array.from(decoded.data[i].embedding), floats.data[i].embedding.map(Math.fround), `vector ${i}`);
  }
  const one = await Promise.all(input.map((s) => client.embeddings.create({ model, input: s })));
  assert.equal(floats.usage.prompt_tokens, one.reduce((n, r) => n + r.usage.prompt_tokens, 0), 'the batch\'s usage sums its inputs\'');
});

test('embeddings.create through three replicas: concurrent requests all answered', async () => {
  const all = await Promise.all(Array.from({ length: 24 }, (_, i) =>
    client.embeddings.create({ model, input: `request ${i}` }).withResponse()));
  for (const { data } of all) assert.equal(data.data.length, 1);
  if (gateway) {
    const replicas = new Set(all.map(({ response }) => response.headers.get('x-inferrail-replica')));
    assert.ok(replicas.size >= 1 && !replicas.has(null));
  }
});

test('embeddings.create, an unknown model: NotFoundError', async () => {
  await assert.rejects(
    client.embeddings.create({ model: 'no-such-model', input: 'x' }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404,
  );
});
