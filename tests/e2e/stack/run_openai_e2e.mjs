// Runs the gateway e2e tests (official openai client, raw SSE checks, the
// bad-input table, client disconnect) against the REAL stack: a 2-stage
// worker pipeline, the scheduler and the gateway, with an API key.
//   ORCA_BIN_DIR=build/bin node tests/e2e/stack/run_openai_e2e.mjs
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from './stack.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const apiKey = 'e2e-secret-key';
const stack = await startStack({ pipeline: 2, apiKey });
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', path.join(here, '..', 'gateway')], {
  stdio: 'inherit',
  env: {
    ...process.env,
    ORCA_BASE_URL: stack.baseUrl,
    ORCA_API_KEY: apiKey,
    ORCA_SCHEDULER_METRICS_URL: `http://127.0.0.1:${stack.schedulerHttpPort}/metrics`,
  },
});
if (r.status !== 0) console.error(stack.logs());
await stack.stop();
process.exit(r.status ?? 1);
