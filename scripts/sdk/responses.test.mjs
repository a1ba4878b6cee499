// The official openai npm SDK's Responses API (client.responses.create),
// unchanged, against `inferrail sim` or through the gateway: a response
// sync and streamed with usage, a long instructions prefix that the second
// request finds cached on the replica that served the first, a
// conversation continued with previous_response_id (on the replica that
// stores it), the stored response retrieved and cancelled (from that
// replica), and errors. Run by scripts/sdk-test.sh, which starts the
// servers and sets the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, gateway, model, responseModel } from './env.mjs';

// Long enough to fill many KV blocks, shared by the requests that follow.
const instructions = Array.from({ length: 60 }, (_, i) =>
  `Rule ${i}: read the file before you edit it, and explain the change in one sentence.`).join(' ');
const tools = [{ type: 'function', name: 'read', description: 'Reads a file', strict: false,
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }];

// The replica that served a response, through the gateway ('' without one).
const replica = (response) => response.headers.get('x-inferrail-replica') ?? '';

test('responses.create, not streamed: a response with usage', async () => {
  const r = await client.responses.create({ model, instructions: 'Be brief.', input: 'Name three prime numbers.', max_output_tokens: 8 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.model, responseModel);
  assert.equal(r.status, 'incomplete'); // max_output_tokens cut it, as vLLM reports
  assert.ok(r.output_text.length > 0);
  assert.equal(r.usage.output_tokens, 8);
  assert.ok(r.usage.input_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + 8);
});

test('responses.create, streamed: the event sequence and the usage in response.completed', async () => {
  const stream = await client.responses.create({ model, instructions: 'Be brief.', input: 'Name three colours.', max_output_tokens: 6, stream: true });
  const types = [];
  let text = '', completed = null, seq = -1;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.sequence_number, seq + 1);
    seq = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), 'response.completed');
  assert.ok(text.length > 0);
  assert.equal(completed.output[0].content[0].text, text);
  assert.equal(completed.usage.output_tokens, 6);
  assert.ok(completed.usage.input_tokens > 0);
});

test('a long instructions prefix: the second request lands where it is cached, and the engine reports it', async () => {
  const first = await client.responses.create({ model, instructions, tools, input: 'Fix the parser test.', max_output_tokens: 4 }).withResponse();
  const second = await client.responses.create({ model, instructions, tools, input: 'Now fix the lexer test.', max_output_tokens: 4, stream: true }).withResponse();
  let usage = null;
  for await (const ev of second.data) {
    if (ev.type === 'response.completed') usage = ev.response.usage;
  }
  assert.ok(usage, 'no response.completed');
  assert.equal(replica(second.response), replica(first.response));
  const cached = usage.input_tokens_details.cached_tokens;
  assert.ok(cached >= usage.input_tokens / 2, `${cached} of ${usage.input_tokens} input tokens cached`);
  if (gateway) {
    assert.equal(Number(second.response.headers.get('x-inferrail-cached-tokens')), cached, 'the gateway predicted the engine\'s cached tokens');
    assert.equal(Number(second.response.headers.get('x-inferrail-prompt-tokens')), usage.input_tokens);
  }
});

test('previous_response_id: the conversation continues on the replica that stores it', async () => {
  const first = await client.responses.create({ model, instructions: 'Be brief.', input: 'Pick a number.', max_output_tokens: 4 }).withResponse();
  let prev = first.data;
  for (let turn = 0; turn < 4; turn++) {
    const stream = turn % 2 === 1;
    const { data, response } = await client.responses.create({
      model, previous_response_id: prev.id, input: `Add ${turn} to it.`, max_output_tokens: 4, stream,
    }).withResponse();
    let r = data;
    if (stream) {
      for await (const ev of data) if (ev.type === 'response.completed') r = ev.response;
    }
    assert.equal(r.previous_response_id, prev.id);
    // The stored conversation is in the prompt: it grows turn after turn.
    assert.ok(r.usage.input_tokens > prev.usage.input_tokens, `turn ${turn}: ${r.usage.input_tokens} after ${prev.usage.input_tokens}`);
    assert.equal(replica(response), replica(first.response));
    if (gateway) assert.equal(response.headers.get('x-inferrail-affinity'), 'pinned');
    prev = r;
  }
});

test('responses.retrieve and responses.cancel: from the replica that stores the response', async () => {
  const { data: created, response } = await client.responses.create({ model, input: 'Keep this.', max_output_tokens: 4 }).withResponse();
  for (let i = 0; i < 3; i++) {
    const { data: got, response: r } = await client.responses.retrieve(created.id).withResponse();
    assert.equal(got.id, created.id);
    assert.equal(got.output_text, created.output_text);
    assert.deepEqual(got.usage, created.usage);
    assert.equal(replica(r), replica(response));
  }
  // vLLM cancels only a background response still running: a finished one is a 400.
  await assert.rejects(client.responses.cancel(created.id),
    (err) => err instanceof OpenAI.BadRequestError && /Cannot cancel a synchronous response/.test(err.message));
  await assert.rejects(client.responses.retrieve('resp_no_such_response'),
    (err) => err instanceof OpenAI.NotFoundError && /not found/.test(err.message));
  await assert.rejects(client.responses.cancel('resp_no_such_response'), (err) => err instanceof OpenAI.NotFoundError);
});

test('an unknown previous_response_id: NotFoundError', async () => {
  await assert.rejects(
    client.responses.create({ model, previous_response_id: 'resp_no_such_response', input: 'x' }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && /not found/.test(err.message),
  );
});

test('an unknown model: NotFoundError', async () => {
  await assert.rejects(
    client.responses.create({ model: 'no-such-model', input: 'x' }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404,
  );
});
