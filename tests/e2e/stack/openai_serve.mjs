// `orca serve` on a free loopback port with the official openai client pointed at it, for e2e tests
// of the OpenAI API (structured outputs, tool calling). stop() ends it with SIGINT (a clean drain).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { binDir, freePort } from './stack.mjs';

/** Starts `orca serve --model=MODEL EXTRA_ARGS...`; resolves once its banner is printed. */
export async function startServeWithClient(model, extraArgs, tag = 'openai') {
  const port = await freePort();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), `orca-${tag}-e2e-`));
  const proc = spawn(path.join(binDir(), 'orca'),
    ['serve', `--model=${model}`, `--port=${port}`, '--grpc-port=0', `--log-dir=${logDir}`, '--threads=1', ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  process.on('exit', () => { try { proc.kill('SIGKILL'); } catch {} });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner in 120 s; stderr:\n${err}`)), 120000);
    const poll = setInterval(() => {
      if (out.includes('Ctrl-C stops everything')) { clearInterval(poll); clearTimeout(timer); resolve(); }
    }, 50);
    proc.on('exit', (code) => { clearInterval(poll); clearTimeout(timer); reject(new Error(`orca serve exited ${code}:\n${err}`)); });
  });
  const logs = () => fs.readdirSync(logDir).map((f) => `--- ${f}\n${fs.readFileSync(path.join(logDir, f), 'utf8').slice(-2000)}`).join('\n');
  return {
    client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 }),
    logs,
    stop: async () => {
      const exited = new Promise((r) => proc.on('exit', r));
      proc.kill('SIGINT');
      await exited;
      fs.rmSync(logDir, { recursive: true, force: true });
    },
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
