// `orca serve` on a free loopback port with the official openai client pointed at it, for e2e tests
// of the OpenAI API (structured outputs, tool calling). stop() ends it with SIGINT (a clean drain).
import fs from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServe, stopServe } from './stack.mjs';

/** Starts `orca serve --model=MODEL EXTRA_ARGS...`; resolves once its banner is printed. */
export async function startServeWithClient(model, extraArgs, tag = 'openai') {
  const s = await startServe(`orca-${tag}-e2e-`, model, ['--threads=1', ...extraArgs], { bannerTimeoutMs: 120000 });
  process.on('exit', () => { try { s.proc.kill('SIGKILL'); } catch {} });
  const logs = () => fs.readdirSync(s.logDir).map((f) => `--- ${f}\n${fs.readFileSync(path.join(s.logDir, f), 'utf8').slice(-2000)}`).join('\n');
  return {
    client: new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 }),
    logs,
    stop: async () => { await stopServe(s); },
  };
}

/** Awaits `promise` and asserts it failed with an OpenAI 400 naming `param`, its message matching `fragment`. */
export async function expect400(promise, param, fragment) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.status, 400, String(e));
    assert.equal(e.param ?? e.error?.param, param, JSON.stringify(e.error));
    assert.match(e.message, fragment);
    return true;
  });
}
