// The environment scripts/sdk-test.sh sets for the openai SDK tests, and
// the client it describes: the server (BASE_URL), the model asked for
// (MODEL) and the one answers name (RESPONSE_MODEL), whether a gateway is
// in front (GATEWAY=1), and its API key (API_KEY).
import assert from 'node:assert/strict';
import OpenAI from 'openai';

export const baseURL = process.env.BASE_URL;
export const model = process.env.MODEL ?? 'sim-8b';
export const responseModel = process.env.RESPONSE_MODEL ?? model;
export const gateway = process.env.GATEWAY === '1';
assert.ok(baseURL, 'BASE_URL must be set');
export const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: process.env.API_KEY ?? 'unused', maxRetries: 0, timeout: 30_000 });
