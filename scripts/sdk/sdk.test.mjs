// The official openai SDK against `inferrail sim` or through the gateway:
// sync and streaming chat and completions, exact usage, request ids, errors,
// and many concurrent streams. Run by scripts/sdk-test.sh, which starts the
// servers and sets the environment below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.BASE_URL;
const model = process.env.MODEL ?? 'sim-8b'; // the name requests use
const responseModel = process.env.RESPONSE_MODEL ?? model; // the name the engine answers with
const tokenizeURL = process.env.TOKENIZE_URL ?? baseURL; // an engine's /tokenize
const expectedModels = JSON.parse(process.env.MODELS ?? '["sim-8b"]');
const streams = Number(process.env.STREAMS ?? 200);
const gateway = process.env.GATEWAY === '1';
// API_KEY, when set, is the one key the gateway accepts (inferrail launch
// --api-key); over https the CA comes from NODE_EXTRA_CA_CERTS.
const apiKey = process.env.API_KEY;
assert.ok(baseURL, 'BASE_URL must be set');
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: apiKey ?? 'unused', maxRetries: 0, timeout: 30_000 });

// The simulator's own count of a prompt's tokens, from vLLM's /tokenize endpoint.
async function tokenCount(body) {
  const res = await fetch(`${tokenizeURL}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return (await res.json()).count;
}

const messages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Name three prime numbers.' },
];

test('chat, not streamed: exact usage', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 12 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, responseModel);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.prompt_tokens, await tokenCount({ messages }));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  assert.equal(typeof r.choices[0].message.content, 'string');
});

test('chat, streamed with usage: one chunk per token, usage last', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 10, stream: true, stream_options: { include_usage: true },
  });
  let role = null, text = '', contentChunks = 0, finish = null, usage = null, afterUsage = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (usage) afterUsage++;
    if (chunk.usage) { usage = chunk.usage; assert.equal(chunk.choices.length, 0); continue; }
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) { text += c.delta.content; contentChunks++; }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(role, 'assistant');
  assert.equal(finish, 'length');
  assert.equal(contentChunks, 10);
  assert.equal(afterUsage, 0);
  assert.equal(usage.completion_tokens, 10);
  assert.equal(usage.prompt_tokens, await tokenCount({ messages }));
  // The same prompt again, on the same engine, is served from the prefix
  // cache, and usage says so. Through the gateway, repeat until the request
  // lands on the replica that served the first.
  const first = await client.chat.completions.create({ model, messages, max_tokens: 1 }).withResponse();
  const replica = first.response.headers.get('x-inferrail-replica');
  if (gateway) assert.ok(replica, 'the gateway names the replica');
  let again;
  for (let i = 0; i < 30; i++) {
    again = await client.chat.completions.create({ model, messages, max_tokens: 1 }).withResponse();
    if (again.response.headers.get('x-inferrail-replica') === replica) break;
  }
  assert.equal(again.response.headers.get('x-inferrail-replica'), replica);
  assert.ok(again.data.usage.prompt_tokens_details.cached_tokens > 0, 'second request found no cached tokens');
  // Deterministic: the same prompt gives the same answer.
  const r = await client.chat.completions.create({ model, messages, max_tokens: 10 });
  assert.equal(r.choices[0].message.content, text);
});

test('completions, not streamed and streamed', async () => {
  const prompt = 'Once upon a time, in a data center far away,';
  const r = await client.completions.create({ model, prompt, max_tokens: 7 });
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.usage.prompt_tokens, await tokenCount({ prompt }));
  assert.equal(r.choices[0].finish_reason, 'length');

  const stream = await client.completions.create({
    model, prompt, max_tokens: 7, stream: true, stream_options: { include_usage: true },
  });
  let text = '', chunks = 0, usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) { usage = chunk.usage; continue; }
    const c = chunk.choices[0];
    if (c.text) { text += c.text; chunks++; }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(chunks, 7);
  assert.equal(finish, 'length');
  assert.equal(text, r.choices[0].text);
  assert.equal(usage.completion_tokens, 7);
  assert.equal(usage.prompt_tokens, r.usage.prompt_tokens);
});

test('x-request-id becomes the response id', async () => {
  const r = await client.chat.completions.create(
    { model, messages, max_tokens: 1 },
    { headers: { 'x-request-id': 'sdk-test-42' } },
  );
  assert.equal(r.id, 'chatcmpl-sdk-test-42');
});

test('async iteration with an abort: the stream stops cleanly', async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages, max_tokens: 500, stream: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content && ++n === 3) ac.abort();
    }
  } catch (err) {
    // Depending on timing the SDK ends the iteration or throws its abort error.
    assert.ok(err.name === 'AbortError' || err instanceof OpenAI.APIUserAbortError, String(err));
  }
  assert.equal(n, 3);
});

test('errors come back in the OpenAI shape', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages, max_tokens: 1 }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.param === 'model',
  );
  await assert.rejects(
    client.chat.completions.create({ model, messages, max_tokens: 1, n: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'n',
  );
});

test('a missing or wrong API key gets 401 invalid_api_key', { skip: !apiKey }, async () => {
  for (const key of ['sk-wrong', apiKey.slice(0, -1), apiKey + 'x']) {
    const other = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: key, maxRetries: 0, timeout: 30_000 });
    await assert.rejects(
      other.chat.completions.create({ model, messages, max_tokens: 1 }),
      (err) => err instanceof OpenAI.AuthenticationError && err.status === 401 && err.code === 'invalid_api_key'
        && err.type === 'invalid_request_error' && !err.message.includes(apiKey),
    );
  }
  const res = await fetch(`${baseURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ model, messages, max_tokens: 1 }),
  });
  assert.equal(res.status, 200, 'x-api-key, as Anthropic-style clients send it');
  await res.body.cancel();
});

test('models list', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, expectedModels);
});

test(`${streams} concurrent streams complete with exact usage`, async () => {
  const one = async (i) => {
    const stream = await client.chat.completions.create({
      model, max_tokens: 5 + (i % 7), stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: `question number ${i}` }],
    });
    let chunks = 0, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      else if (chunk.choices[0].delta.content) chunks++;
    }
    assert.equal(chunks, 5 + (i % 7));
    assert.equal(usage.completion_tokens, chunks);
  };
  await Promise.all(Array.from({ length: streams }, (_, i) => one(i)));
});
