// The official Anthropic TypeScript SDK (@anthropic-ai/sdk), unchanged,
// against `inferrail sim` or through the gateway: messages sync and
// streamed with usage, the beta path (?beta=true, as Claude Code calls it),
// a Claude-Code-shaped session whose cache reads grow turn after turn
// although its billing header changes, count_tokens, and errors. Run by
// scripts/sdk-test.sh, which starts the servers and sets the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.BASE_URL;
const model = process.env.MODEL ?? 'sim-8b';
const responseModel = process.env.RESPONSE_MODEL ?? model;
// An engine to ask for its own count (its /v1/messages/count_tokens).
const engineURL = process.env.ENGINE_URL ?? baseURL;
const engineModel = process.env.ENGINE_MODEL ?? responseModel;
const gateway = process.env.GATEWAY === '1';
assert.ok(baseURL, 'BASE_URL must be set');
const client = new Anthropic({ baseURL, apiKey: process.env.API_KEY ?? 'unused', maxRetries: 0, timeout: 30_000 });

// The engine's count of a request's prompt.
async function engineCount(body) {
  const res = await fetch(`${engineURL}/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, model: engineModel }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).input_tokens;
}

const system = [
  { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.0; cch=00000;' },
  { type: 'text', text: 'You are a careful coding agent. Read files before you edit them, and explain each change you make.' },
];
const messages = [{ role: 'user', content: 'Name three prime numbers.' }];

const prompt = (u) => u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);

test('messages, not streamed: a message with exact usage', async () => {
  const m = await client.messages.create({ model, system, messages, max_tokens: 12 });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, responseModel);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.usage.output_tokens, 12);
  assert.equal(prompt(m.usage), await engineCount({ system, messages }));
});

test('messages, streamed: the event sequence and usage in message_start and message_delta', async () => {
  const stream = await client.messages.create({ model, system, messages, max_tokens: 9, stream: true });
  const types = [];
  let text = '', start = null, delta = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'message_start') start = ev.message.usage;
    if (ev.type === 'content_block_delta') text += ev.delta.text;
    if (ev.type === 'message_delta') delta = ev;
  }
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'));
  assert.ok(text.length > 0);
  assert.ok(start && start.input_tokens > 0);
  assert.equal(delta.delta.stop_reason, 'max_tokens');
  assert.equal(delta.usage.output_tokens, 9);
  assert.equal(prompt(delta.usage), await engineCount({ system, messages }));
});

test('the beta path (?beta=true), streamed with the helper', async () => {
  const stream = client.beta.messages.stream({ model, system, messages, max_tokens: 5 });
  const final = await stream.finalMessage();
  assert.equal(final.usage.output_tokens, 5);
  assert.equal(final.content[0].type, 'text');
});

test('a Claude-Code-shaped session keeps its prefix cached', async () => {
  const tools = [{ name: 'Read', description: 'Reads a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];
  const history = [{ role: 'user', content: [{ type: 'text', text: 'The parser test fails on empty input; find out why and fix it.' }] }];
  let lastRead = -1;
  for (let turn = 0; turn < 4; turn++) {
    const sys = [{ type: 'text', text: `x-anthropic-billing-header: cc_version=2.1.0; cch=${10000 + turn};` }, system[1]];
    const m = await client.messages.create({
      model, system: sys, tools, messages: history, max_tokens: 4,
      metadata: { user_id: 'user_sdk_account__session_1' },
    });
    assert.equal(prompt(m.usage), await engineCount({ system: sys, tools, messages: history }));
    assert.ok(m.usage.cache_read_input_tokens > lastRead,
      `turn ${turn}: ${m.usage.cache_read_input_tokens} cached tokens after ${lastRead}`);
    lastRead = m.usage.cache_read_input_tokens;
    const id = `toolu_${turn}`;
    history.push({ role: 'assistant', content: [{ type: 'text', text: m.content[0].text }, { type: 'tool_use', id, name: 'Read', input: { path: `parse${turn}.go` } }] });
    history.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: `package parse // file ${turn}` }] });
    history.push({ role: 'system', content: `<system-reminder>turn ${turn}</system-reminder>` });
  }
});

test('count_tokens: the engine\'s number', async () => {
  const r = await client.messages.countTokens({ model, system, messages });
  assert.equal(r.input_tokens, await engineCount({ system, messages }));
});

test('an unknown model: NotFoundError', async () => {
  await assert.rejects(
    client.messages.create({ model: 'no-such-model', messages, max_tokens: 2 }),
    (err) => {
      assert.ok(err instanceof Anthropic.NotFoundError, String(err));
      assert.equal(err.status, 404);
      assert.equal(err.error.type, 'error');
      if (gateway) assert.equal(err.error.error.type, 'not_found_error');
      return true;
    },
  );
});

test('a bad request: BadRequestError', async () => {
  await assert.rejects(
    client.messages.create({ model, messages: [{ role: 'user', content: [{ type: 'video' }] }], max_tokens: 2 }),
    (err) => err instanceof Anthropic.BadRequestError && err.status === 400,
  );
});
