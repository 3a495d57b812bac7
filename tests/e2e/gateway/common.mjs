// Shared setup for the gateway e2e tests. They drive a running gateway (the
// real local stack from `orca serve`, or orca-gateway in front of
// orca-fake-scheduler, see run_with_fake_scheduler.sh) through:
//   ORCA_BASE_URL       gateway HTTP base, e.g. http://127.0.0.1:8000 (required)
//   ORCA_API_KEY        API key when the gateway has --api-keys (optional)
//   ORCA_MAX_BODY_BYTES the gateway's --max-body-bytes (default 4194304)
//   ORCA_SCHEDULER_METRICS_URL  a scheduler's /metrics, for the disconnect test
//                       (optional; else the gateway's /ready scheduler stats)
import OpenAI from 'openai';

export const BASE_URL = (process.env.ORCA_BASE_URL || '').replace(/\/+$/, '').replace(/\/v1$/, '');
if (!BASE_URL) throw new Error('ORCA_BASE_URL is not set (e.g. http://127.0.0.1:8000)');
export const API_KEY = process.env.ORCA_API_KEY || '';
export const MAX_BODY_BYTES = Number(process.env.ORCA_MAX_BODY_BYTES || 4194304);
export const SCHEDULER_METRICS_URL = process.env.ORCA_SCHEDULER_METRICS_URL || '';

export function client() {
  return new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY || 'unused', maxRetries: 0, timeout: 60_000 });
}

export function authHeaders(extra = {}) {
  const headers = { 'Content-Type': 'application/json', ...extra };
  if (API_KEY) headers.Authorization = `Bearer ${API_KEY}`;
  return headers;
}

/** POST with a raw body (string or Buffer); returns {status, headers, text, json}. */
export async function rawPost(path, body, headers = authHeaders(), signal = undefined) {
  const res = await fetch(`${BASE_URL}${path}`, { method: 'POST', headers, body, signal });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

export async function getJson(path) {
  const res = await fetch(`${BASE_URL}${path}`, { headers: authHeaders() });
  return { status: res.status, json: await res.json() };
}

let modelInfo = null;
/** The served model's id and max_model_len, from /v1/models. */
export async function model() {
  if (!modelInfo) {
    const { status, json } = await getJson('/v1/models');
    if (status !== 200) throw new Error(`/v1/models answered ${status}`);
    modelInfo = { id: json.data[0].id, maxModelLen: json.data[0].max_model_len };
  }
  return modelInfo;
}

/**
 * Splits an SSE body into its `data:` payloads, checking the framing on the
 * way: every event is exactly one `data: ...` line followed by a blank line.
 */
export function sseData(text) {
  if (!text.endsWith('\n\n')) throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text.slice(0, -2).split('\n\n').map((event) => {
    if (!event.startsWith('data: ') || event.includes('\n')) throw new Error(`malformed SSE event: ${JSON.stringify(event)}`);
    return event.slice('data: '.length);
  });
}

export function isInt(v) { return Number.isInteger(v); }
