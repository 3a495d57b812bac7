// D7: the CRD's cross-field rules are CEL x-kubernetes-validations, so that the API
// server (and so `kubectl apply`) refuses a bad spec before the operator sees it.
// Every rule is evaluated here with a real CEL implementation (@bufbuild/cel, which
// passes the cel-spec conformance suite) on the object as the API server would see
// it: after structural defaulting, with `self` bound to the rule's node. Kubernetes
// evaluates with cel-go plus its own libraries; the rules use only standard CEL
// (has, size, in, string(), matches, startsWith/endsWith, all), so the verdicts are
// the same. Each rule must refuse its bad specs (and only its rule), accept the good
// ones, agree with the operator's own validation, and accept every shipped spec.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import * as YAML from "yaml";

import { CRD_FILE, ROOT, crdValidator, helmTemplate, operatorRender, parseDocs, readYaml, tmpDir } from "./lib.mjs";

const { run } = await import("@bufbuild/cel");

const crd = readYaml(CRD_FILE)[0];
const root = crd.spec.versions[0].schema.openAPIV3Schema;
const withDefaults = crdValidator(crd, { useDefaults: true, closed: false });

/** Every rule with the path of its node ([] = the object itself; "*" = each item). */
function collectRules(schema, at = [], out = []) {
  for (const v of schema["x-kubernetes-validations"] ?? []) out.push({ path: at, rule: v.rule, message: v.message });
  for (const [k, child] of Object.entries(schema.properties ?? {})) collectRules(child, [...at, k], out);
  if (schema.items) collectRules(schema.items, [...at, "*"], out);
  return out;
}
const RULES = collectRules(root);

/** JSON -> CEL input: objects are maps, integers are CEL ints. */
function toCel(v) {
  if (Array.isArray(v)) return v.map(toCel);
  if (v && typeof v === "object") return new Map(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  if (Number.isInteger(v)) return BigInt(v);
  return v;
}

function nodesAt(obj, p) {
  if (!p.length) return obj === undefined ? [] : [obj];  // rules run only on nodes that are present
  if (obj === undefined || obj === null) return [];
  if (p[0] === "*") return Array.isArray(obj) ? obj.flatMap((x) => nodesAt(x, p.slice(1))) : [];
  return nodesAt(obj[p[0]], p.slice(1));
}

/** The messages of the rules the API server would refuse `cr` with (after defaulting). */
function celViolations(cr) {
  const obj = structuredClone(cr);
  assert.ok(withDefaults(obj), `structurally invalid: ${JSON.stringify(withDefaults.errors)}`);
  const failed = [];
  for (const r of RULES) {
    for (const node of nodesAt(obj, r.path)) {
      const result = run(r.rule, { self: toCel(node) });
      if (result instanceof Error || typeof result !== "boolean") throw new Error(`rule ${r.rule}: ${result}`);
      if (!result) failed.push(r.message);
    }
  }
  return failed;
}

function operatorVerdict(cr) {
  const file = path.join(tmpDir("cel"), `${Math.random().toString(36).slice(2)}.yaml`);
  fs.writeFileSync(file, YAML.stringify(cr));
  return operatorRender(file);
}

const base = (name = "demo") => ({
  apiVersion: "serving.orca.dev/v1alpha1",
  kind: "OrcaDeployment",
  metadata: { name, namespace: "ns" },
  spec: { model: { uri: "synthetic://llama?layers=2&hidden=64&heads=4" } },
});
const gpu = (s, n, where = "limits") => { s.worker = { resources: { [where]: { "nvidia.com/gpu": n } } }; };

// Bad specs: `rule` is a substring of the one CEL message that must refuse it, `operator`
// of the operator's error for the same spec.
const BAD = [
  { name: "name with a dot", cr: () => base("chat.v1"), rule: "must be a DNS label", operator: "must be a DNS label" },
  { name: "35-character name", cr: () => base("a".repeat(35)), rule: "metadata.name is too long", operator: "is too long" },
  { name: "34 characters and 11 replicas", cr: () => { const c = base("a".repeat(34)); c.spec.replicas = 11; return c; },
    rule: "metadata.name is too long", operator: "is too long" },
  { name: "kvSlots and kvMemory", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 64, kvMemory: { size: "1Gi" } }; return c; },
    rule: "set kvSlots or kvMemory, not both", operator: "not both" },
  { name: "kvSlots below maxBatchSize", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 8, maxBatchSize: 16, kvBlockSize: 8 }; return c; },
    rule: "kvSlots must be at least maxBatchSize", operator: "fewer than maxBatchSize" },
  { name: "kvSlots below the default maxBatchSize", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 15, kvBlockSize: 5 }; return c; },
    rule: "kvSlots must be at least maxBatchSize", operator: "fewer than maxBatchSize" },
  { name: "kvSlots not whole blocks", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 8200 }; return c; },
    rule: "must be a multiple of kvBlockSize", operator: "spec.scheduler.kvSlots: 8200 is not a multiple of kvBlockSize (16)" },
  { name: "default kvSlots not whole blocks", cr: () => { const c = base(); c.spec.scheduler = { kvBlockSize: 48 }; return c; },
    rule: "must be a multiple of kvBlockSize", operator: "the default kvSlots (8192) is not a multiple of kvBlockSize (48)" },
  { name: "more blocks than a worker's KV cache", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 2 ** 32 }; return c; },
    rule: "is too many KV blocks", operator: "blocks fit a worker's KV cache" },
  { name: "more blocks than the paged pool", cr: () => { const c = base(); c.spec.scheduler = { policy: "paged", kvBlockSize: 1, kvSlots: 2 ** 30 }; return c; },
    rule: "is too many KV blocks", operator: "1073741823 the paged block pool" },
  { name: "prefix caching beyond the pool", cr: () => { const c = base(); c.spec.scheduler = { enablePrefixCaching: true, kvBlockSize: 1, kvSlots: 2 ** 30 }; return c; },
    rule: "is too many KV blocks", operator: "1073741823 the paged block pool" },
  { name: "chunk below maxBatchSize", cr: () => { const c = base(); c.spec.scheduler = { maxNumBatchedTokens: 15 }; return c; },
    rule: "maxNumBatchedTokens must be 0 (chunked prefill off) or at least maxBatchSize", operator: "must be 0 (off) or at least maxBatchSize (16)" },
  { name: "baseline with chunked prefill", cr: () => { const c = base(); c.spec.scheduler = { policy: "request-level", maxNumBatchedTokens: 512 }; return c; },
    rule: "the request-level baseline takes neither", operator: "the request-level baseline takes neither" },
  { name: "slowdown not above 1", cr: () => { const c = base(); c.spec.scheduler = { maxPrefillSlowdown: 0.5 }; return c; },
    rule: "maxPrefillSlowdown must be 0 (off) or greater than 1", operator: "must be 0 (off) or in (1, 1000]" },
  { name: "baseline with a time budget", cr: () => { const c = base(); c.spec.scheduler = { policy: "request-level", maxPrefillSlowdown: 2 }; return c; },
    rule: "the request-level baseline takes no maxPrefillSlowdown", operator: "maxPrefillSlowdown" },
  { name: "baseline with a long-prefill cap", cr: () => { const c = base(); c.spec.scheduler = { policy: "request-level", longPrefillTokenThreshold: 128 }; return c; },
    rule: "the request-level baseline takes no longPrefillTokenThreshold", operator: "longPrefillTokenThreshold" },
  { name: "baseline with priorities", cr: () => { const c = base(); c.spec.scheduler = { policy: "request-level", schedulingOrder: "priority" }; return c; },
    rule: "the request-level baseline takes neither", operator: "nor schedulingOrder priority" },
  { name: "kvMemory without bytesPerToken", cr: () => { const c = base(); c.spec.model.uri = "pvc://m/llama"; c.spec.scheduler = { kvMemory: { size: "1Gi" } }; return c; },
    rule: "bytesPerToken is required", operator: "bytesPerToken: is required" },
  { name: "GPU limits != tensor", cr: () => { const c = base(); c.spec.parallelism = { tensor: 2 }; gpu(c.spec, 1); return c; },
    rule: "limits[nvidia.com/gpu] must equal parallelism.tensor", operator: "one tensor-parallel shard per GPU" },
  { name: "GPU requests != tensor (string)", cr: () => { const c = base(); gpu(c.spec, "4", "requests"); return c; },
    rule: "requests[nvidia.com/gpu] must equal parallelism.tensor", operator: "one tensor-parallel shard per GPU" },
  { name: "gguf format of a directory", cr: () => { const c = base(); c.spec.model = { uri: "/models/llama", format: "gguf" }; return c; },
    rule: "needs model.uri to name a .gguf file", operator: "needs the path of a .gguf file" },
  // Also not a .gguf path: both rules refuse it.
  { name: "synthetic gguf", cr: () => { const c = base(); c.spec.model.format = "gguf"; return c; },
    rule: "synthetic:// models are written as Hugging Face", also: ["needs model.uri to name a .gguf file"],
    operator: "use format: hf" },
  { name: "no rollout budget", cr: () => { const c = base(); c.spec.rollout = { maxUnavailable: 0 }; return c; },
    rule: "cannot both be 0", operator: "cannot both be 0" },
  { name: "NVIDIA_VISIBLE_DEVICES=all", cr: () => { const c = base(); c.spec.worker = { env: [{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }] }; return c; },
    rule: "NVIDIA_VISIBLE_DEVICES is set by the NVIDIA device plugin", operator: "NVIDIA_VISIBLE_DEVICES is set by the NVIDIA device plugin" },
  { name: "gateway --config", cr: () => { const c = base(); c.spec.gateway = { args: ["--config=/tmp/x.yaml"] }; return c; },
    rule: "--config is the rendered flag file", operator: "--config is the rendered flag file" },
  { name: "scheduler env pinning GPUs", cr: () => { const c = base(); c.spec.scheduler = { env: [{ name: "NVIDIA_VISIBLE_DEVICES", value: "0" }] }; return c; },
    rule: "NVIDIA_VISIBLE_DEVICES", operator: "spec.scheduler.env[0]" },
];

// Good specs near every rule's edge.
const GOOD = [
  { name: "minimal", cr: () => base() },
  { name: "34-character name, 10 replicas", cr: () => { const c = base("a".repeat(34)); c.spec.replicas = 10; return c; } },
  { name: "33-character name, 64 replicas", cr: () => { const c = base("a".repeat(33)); c.spec.replicas = 64; return c; } },
  { name: "kvSlots equal to maxBatchSize", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 16 }; return c; } },
  { name: "kvMemory for a synthetic model", cr: () => { const c = base(); c.spec.scheduler = { kvMemory: { size: "64Mi" } }; return c; } },
  { name: "kvMemory with bytesPerToken", cr: () => { const c = base(); c.spec.model.uri = "pvc://m/llama"; c.spec.scheduler = { kvMemory: { size: "1Gi", bytesPerToken: 4096 } }; return c; } },
  { name: "GPUs = tensor as integer", cr: () => { const c = base(); c.spec.parallelism = { tensor: 4 }; gpu(c.spec, 4); return c; } },
  { name: "GPUs = tensor as string", cr: () => { const c = base(); c.spec.parallelism = { tensor: 2 }; gpu(c.spec, "2", "requests"); return c; } },
  { name: "gguf file", cr: () => { const c = base(); c.spec.model = { uri: "/models/q8.gguf", format: "gguf" }; return c; } },
  { name: "surge only", cr: () => { const c = base(); c.spec.rollout = { maxUnavailable: 0, maxSurge: 1 }; return c; } },
  { name: "every scheduling knob at its edge", cr: () => {
    const c = base();
    c.spec.scheduler = { policy: "paged", kvBlockSize: 32, kvSlots: 4096, maxNumBatchedTokens: 16, enablePrefixCaching: true,
                         schedulingOrder: "priority", priorityAgingMs: 0, drainGraceSeconds: 0, apiKeys: { secretName: "k" } };
    c.spec.gateway = { drainGraceSeconds: 3600 };
    return c;
  } },
  { name: "256-token blocks, default kvSlots", cr: () => { const c = base(); c.spec.scheduler = { kvBlockSize: 256 }; return c; } },
  { name: "kvMemory rounds to whole blocks", cr: () => { const c = base(); c.spec.scheduler = { kvBlockSize: 48, kvMemory: { size: "64Mi" } }; return c; } },
  { name: "the most blocks a worker holds", cr: () => { const c = base(); c.spec.scheduler = { kvSlots: 134217727 * 16 }; return c; } },
  { name: "the most blocks the paged pool holds", cr: () => { const c = base(); c.spec.scheduler = { policy: "paged", kvBlockSize: 1, kvSlots: 1073741823 }; return c; } },
  { name: "baseline as it was", cr: () => { const c = base(); c.spec.scheduler = { policy: "request-level", kvSlots: 2048 }; return c; } },
  { name: "extra env and args", cr: () => { const c = base(); c.spec.worker = { env: [{ name: "NCCL_DEBUG", value: "INFO" }], args: ["--threads=4"] }; return c; } },
];

test("the CRD carries the cross-field rules, each with a message", () => {
  assert.ok(RULES.length >= 10, RULES.map((r) => r.rule).join("\n"));
  for (const r of RULES) assert.ok(r.message && r.message.length > 20, r.rule);
});

test("every rule refuses its bad specs, and only its rule does; the operator agrees", () => {
  for (const c of BAD) {
    const cr = c.cr();
    const failed = celViolations(cr);
    const expected = [c.rule, ...(c.also ?? [])];
    assert.equal(failed.length, expected.length, `${c.name}: ${JSON.stringify(failed)}`);
    for (const e of expected) assert.ok(failed.some((f) => f.includes(e)), `${c.name}: not refused by ${e}: ${failed}`);
    const r = operatorVerdict(cr);
    assert.notEqual(r.status, 0, `${c.name}: the operator accepted it`);
    assert.ok(r.stderr.includes(c.operator), `${c.name}: ${r.stderr}`);
  }
});

test("every rule has at least one bad spec here", () => {
  for (const r of RULES) assert.ok(BAD.some((c) => r.message.includes(c.rule)), `no bad case for: ${r.message}`);
});

test("good specs at every edge pass every rule and the operator", () => {
  for (const c of GOOD) {
    const cr = c.cr();
    assert.deepEqual(celViolations(cr), [], c.name);
    const r = operatorVerdict(cr);
    assert.equal(r.status, 0, `${c.name}: ${r.stderr}`);
  }
});

test("CEL and the operator agree on a grid of kvSlots x maxBatchSize x GPUs x tensor x name length", () => {
  let refused = 0, total = 0;
  for (const kvSlots of [undefined, 1, 16, 17]) {
    for (const maxBatchSize of [undefined, 16]) {
      for (const [tensor, gpus] of [[1, undefined], [2, 2], [2, 1], [4, "4"]]) {
        for (const [name, replicas] of [["demo", 3], ["a".repeat(34), 10], ["a".repeat(34), 11]]) {
          const cr = base(name);
          cr.spec.replicas = replicas;
          cr.spec.parallelism = { tensor };
          cr.spec.scheduler = {};
          if (kvSlots !== undefined) cr.spec.scheduler.kvSlots = kvSlots;
          if (maxBatchSize !== undefined) cr.spec.scheduler.maxBatchSize = maxBatchSize;
          if (gpus !== undefined) gpu(cr.spec, gpus);
          const cel = celViolations(cr).length === 0;
          const op = operatorVerdict(cr).status === 0;
          assert.equal(cel, op, `CEL ${cel ? "accepts" : "refuses"} but the operator ${op ? "accepts" : "refuses"}: ${JSON.stringify(cr)}`);
          refused += !cel;
          ++total;
        }
      }
    }
  }
  assert.ok(refused > 0 && refused < total, `${refused}/${total} refused`);
});

test("CEL and the operator agree on a grid of policy x chunk x order x block size x kvSlots x prefix caching", () => {
  let refused = 0, total = 0;
  for (const policy of ["orca", "paged", "request-level"]) {
    for (const maxNumBatchedTokens of [0, 15, 16]) {
      for (const schedulingOrder of ["fcfs", "priority"]) {
        for (const kvBlockSize of [16, 48]) {
          for (const kvSlots of [undefined, 4096, 2 ** 31]) {
            for (const enablePrefixCaching of [false, true]) {
              const cr = base();
              cr.spec.scheduler = { policy, maxNumBatchedTokens, schedulingOrder, kvBlockSize, enablePrefixCaching };
              if (kvSlots !== undefined) cr.spec.scheduler.kvSlots = kvSlots;
              const cel = celViolations(cr).length === 0;
              const op = operatorVerdict(cr).status === 0;
              assert.equal(cel, op, `CEL ${cel ? "accepts" : "refuses"} but the operator ${op ? "accepts" : "refuses"}: ${JSON.stringify(cr.spec.scheduler)}`);
              refused += !cel;
              ++total;
            }
          }
        }
      }
    }
  }
  assert.ok(refused > 0 && refused < total, `${refused}/${total} refused`);
});

test("every shipped OrcaDeployment passes every rule", () => {
  const shipped = [];
  const examples = path.join(ROOT, "deploy/examples");
  for (const f of fs.readdirSync(examples).filter((x) => x.endsWith(".yaml"))) {
    shipped.push(...readYaml(path.join(examples, f)).filter((o) => o.kind === "OrcaDeployment"));
  }
  const values = path.join(ROOT, "tests/deploy/values");
  for (const f of fs.readdirSync(values).filter((x) => x.endsWith(".yaml") && !x.startsWith("bad-"))) {
    const text = fs.readFileSync(path.join(values, f), "utf8");
    if (/^# post-render: true$/m.test(text)) {
      const doc = YAML.parse(text);
      shipped.push({ ...base(doc.orcaDeployment.name), spec: doc.orcaDeployment.spec });
      continue;
    }
    shipped.push(...parseDocs(helmTemplate(path.join(values, f))).filter((o) => o.kind === "OrcaDeployment"));
  }
  assert.ok(shipped.length >= 5, `${shipped.length}`);
  for (const cr of shipped) assert.deepEqual(celViolations(cr), [], cr.metadata.name);
});
