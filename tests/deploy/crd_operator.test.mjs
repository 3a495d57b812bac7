// The OrcaDeployment CRD and what orca-operator renders from it: the CRD is a
// valid structural schema; the examples validate against it; invalid specs are
// refused by the schema or, for cross-field rules, by the operator; the
// operator's defaults equal the CRD's; every rendered object is valid.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import * as YAML from "yaml";

import {
  CRD_FILE, ROOT, checkKnownFields, crdValidator, operatorRender, readYaml, tmpDir, validateObject, yamllint,
} from "./lib.mjs";

const crd = readYaml(CRD_FILE)[0];
const validate = crdValidator(crd);
const EXAMPLES = path.join(ROOT, "deploy/examples");
const examples = fs.readdirSync(EXAMPLES).filter((f) => f.endsWith(".yaml")).map((f) => path.join(EXAMPLES, f));

function writeCr(name, obj) {
  const file = path.join(tmpDir("crs"), `${name}.yaml`);
  fs.writeFileSync(file, YAML.stringify(obj));
  return file;
}

const minimal = () => ({
  apiVersion: "serving.orca.dev/v1alpha1",
  kind: "OrcaDeployment",
  metadata: { name: "demo", namespace: "ns" },
  spec: { model: { uri: "synthetic://llama?layers=2&hidden=64&heads=4" } },
});

test("the CRD is a valid apiextensions.k8s.io/v1 object", async () => {
  await validateObject(crd);
  checkKnownFields([crd]);
  assert.equal(yamllint(fs.readFileSync(CRD_FILE, "utf8")), "");
});

test("the CRD serves and stores v1alpha1 with status, scale and printer columns", () => {
  assert.equal(crd.metadata.name, "orcadeployments.serving.orca.dev");
  assert.deepEqual(crd.spec.names.shortNames, ["orca"]);
  assert.equal(crd.spec.scope, "Namespaced");
  const [v] = crd.spec.versions;
  assert.equal(crd.spec.versions.length, 1);
  assert.ok(v.served && v.storage);
  assert.deepEqual(v.subresources.status, {});
  assert.deepEqual(v.subresources.scale, { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas",
                                           labelSelectorPath: ".status.selector" });
  const columns = v.additionalPrinterColumns.map((c) => c.name);
  for (const c of ["Replicas", "Ready", "Pipeline", "Tensor", "Available", "Age"]) assert.ok(columns.includes(c), c);
  const status = v.schema.openAPIV3Schema.properties.status.properties;
  assert.deepEqual(status.conditions.items.properties.type.enum, ["Available", "Progressing", "Degraded"]);
  for (const f of ["observedGeneration", "readyReplicas", "pipelines", "selector"]) assert.ok(status[f], f);
  assert.deepEqual(v.schema.openAPIV3Schema.properties.spec.required, ["model"]);
});

test("the schema is structural: every node has a type", () => {
  const missing = [];
  const walk = (s, at) => {
    if (!s || typeof s !== "object") return;
    if (!s.type && !s["x-kubernetes-int-or-string"] && !s["x-kubernetes-preserve-unknown-fields"]) missing.push(at);
    for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, `${at}.${k}`);
    if (s.items) walk(s.items, `${at}[]`);
    if (typeof s.additionalProperties === "object") walk(s.additionalProperties, `${at}{}`);
  };
  walk(crd.spec.versions[0].schema.openAPIV3Schema, "");
  assert.deepEqual(missing, []);
});

/** `objects` with each rendered internal-token Secret's token (drawn afresh by every --render) masked. */
function maskTokens(objects) {
  return objects.map((o) => (o.kind === "Secret" && o.metadata?.name?.endsWith("-internal-token")
    ? { ...o, data: Object.fromEntries(Object.keys(o.data ?? {}).map((k) => [k, "<drawn token>"])) } : o));
}

test("the examples are valid objects and their OrcaDeployments render into valid objects", async () => {
  assert.ok(examples.length >= 4);
  const all = [];
  let deployments = 0;
  for (const file of examples) {
    assert.equal(yamllint(fs.readFileSync(file, "utf8")), "", path.basename(file));
    const docs = readYaml(file);
    for (const doc of docs) {
      if (doc.kind === "OrcaDeployment") {
        assert.ok(validate(doc), `${path.basename(file)}: ${JSON.stringify(validate.errors)}`);
        ++deployments;
      } else {
        await validateObject(doc);
        all.push(doc);
      }
    }
    if (!docs.some((d) => d.kind === "OrcaDeployment")) continue;
    const r = operatorRender(file);
    assert.equal(r.status, 0, `${path.basename(file)}: ${r.stderr}`);
    const objects = JSON.parse(r.stdout);
    for (const o of objects) await validateObject(o);
    all.push(...objects);
    const yaml = operatorRender(file, "yaml");
    assert.equal(yaml.status, 0);
    assert.equal(yamllint(yaml.stdout), "", path.basename(file));
    assert.deepEqual(maskTokens(YAML.parseAllDocuments(yaml.stdout).map((d) => d.toJS())), maskTokens(objects),
                     "YAML and JSON renderings agree");
  }
  assert.ok(deployments >= 2);
  checkKnownFields(all);
  const kinds = new Set(all.map((o) => o.kind));
  for (const k of ["ConfigMap", "Service", "StatefulSet", "Deployment", "ServiceMonitor", "PodDisruptionBudget",
                   "NetworkPolicy", "HorizontalPodAutoscaler", "ScaledObject"]) {
    assert.ok(kinds.has(k), k);
  }
});

test("the autoscaling examples scale an OrcaDeployment on orca:num_requests_waiting, by labels Prometheus has", () => {
  const docs = examples.flatMap((f) => readYaml(f));
  const crs = docs.filter((d) => d.kind === "OrcaDeployment");
  // The target labels the operator's ServiceMonitor gives every scraped series.
  const monitored = structuredClone(crs[0]);
  monitored.spec.monitoring = { serviceMonitor: { enabled: true } };
  const file = writeCr("monitored", monitored);
  const [sm] = JSON.parse(operatorRender(file).stdout).filter((o) => o.kind === "ServiceMonitor");
  const targetLabels = new Set(["namespace", "pod", "service", "model_name",
                                ...sm.spec.endpoints[0].relabelings.map((r) => r.targetLabel)]);
  const hpa = docs.find((d) => d.kind === "HorizontalPodAutoscaler");
  const keda = docs.find((d) => d.kind === "ScaledObject");
  for (const ref of [hpa.spec.scaleTargetRef, keda.spec.scaleTargetRef]) {
    assert.equal(ref.apiVersion, "serving.orca.dev/v1alpha1");
    assert.equal(ref.kind, "OrcaDeployment");
    assert.ok(crs.some((c) => c.metadata.name === ref.name), `${ref.name} is an example OrcaDeployment`);
  }
  // The CRD's scale subresource is what both drive.
  assert.equal(crd.spec.versions[0].subresources.scale.specReplicasPath, ".spec.replicas");
  assert.equal(hpa.spec.metrics[0].pods.metric.name, "orca_num_requests_waiting");
  const query = keda.spec.triggers[0].metadata.query;
  assert.match(query, /orca:num_requests_waiting\{/);
  for (const m of query.matchAll(/([a-z_]+)=~?"/g)) assert.ok(targetLabels.has(m[1]), `label ${m[1]} is not on the series`);
  assert.ok(query.includes(`orca_deployment="${keda.spec.scaleTargetRef.name}"`));
});

// Specs the API server refuses through the schema; `operator` is the message
// orca-operator gives for the same spec ("" when only the schema can tell,
// e.g. unknown fields, which the API server prunes).
const INVALID = [
  { name: "pipeline 0", patch: (s) => { s.parallelism = { pipeline: 0 }; }, operator: "spec.parallelism.pipeline" },
  { name: "tensor 17", patch: (s) => { s.parallelism = { tensor: 17 }; }, operator: "spec.parallelism.tensor" },
  { name: "policy fifo", patch: (s) => { s.scheduler = { policy: "fifo" }; }, operator: "spec.scheduler.policy" },
  { name: "negative replicas", patch: (s) => { s.replicas = -1; }, operator: "spec.replicas" },
  { name: "http model", patch: (s) => { s.model.uri = "https://example.com/m"; }, operator: "spec.model.uri" },
  { name: "ingress service", patch: (s) => { s.gateway = { service: { type: "Ingress" } }; }, operator: "spec.gateway.service.type" },
  { name: "memory lots", patch: (s) => { s.scheduler = { kvMemory: { size: "lots" } }; }, operator: "spec.scheduler.kvMemory.size" },
  { name: "bad interval", patch: (s) => { s.monitoring = { serviceMonitor: { interval: "soon" } }; }, operator: "interval" },
  { name: "no model", patch: (s) => { delete s.model; }, operator: "spec.model.uri" },
  { name: "typo", patch: (s) => { s.paralelism = { pipeline: 2 }; }, operator: "" },
  { name: "api keys without secret", patch: (s) => { s.gateway = { apiKeys: {} }; }, operator: "secretName" },
];

test("invalid specs are refused by the schema and, when the operator can tell, by the operator", () => {
  for (const c of INVALID) {
    const cr = minimal();
    c.patch(cr.spec);
    assert.equal(validate(cr), false, `${c.name}: the schema accepted it`);
    if (!c.operator) continue;
    const r = operatorRender(writeCr(c.name.replace(/ /g, "-"), cr));
    assert.notEqual(r.status, 0, `${c.name}: the operator accepted it`);
    assert.ok(r.stderr.includes(c.operator), `${c.name}: ${r.stderr}`);
  }
});

test("cross-field rules (CEL in the CRD, checked in cel.test.mjs) are enforced by the operator too", () => {
  const cases = [
    [(s) => { s.scheduler = { kvSlots: 4, maxBatchSize: 16 }; }, "fewer than maxBatchSize"],
    [(s) => { s.parallelism = { tensor: 2 }; s.worker = { resources: { limits: { "nvidia.com/gpu": 1 } } }; }, "each worker pod runs one tensor-parallel shard per GPU"],
    [(s) => { s.scheduler = { kvSlots: 64, kvMemory: { size: "1Gi" } }; }, "not both"],
  ];
  for (const [patch, message] of cases) {
    const cr = minimal();
    patch(cr.spec);
    assert.ok(validate(cr), `schema: ${JSON.stringify(validate.errors)}`);
    const r = operatorRender(writeCr("cross", cr));
    assert.notEqual(r.status, 0);
    assert.ok(r.stderr.includes(message), r.stderr);
  }
});

test("the operator applies the same defaults as the CRD", () => {
  const withDefaults = crdValidator(crd, { useDefaults: true });
  const variants = [
    minimal(),
    { ...minimal(), spec: { ...minimal().spec, scheduler: { maxBatchSize: 4 }, gateway: { service: {} } } },
    { ...minimal(), spec: { ...minimal().spec, parallelism: { pipeline: 3 }, monitoring: { serviceMonitor: { enabled: true } } } },
  ];
  variants.forEach((cr, i) => {
    const defaulted = structuredClone(cr);
    assert.ok(withDefaults(defaulted), JSON.stringify(withDefaults.errors));
    assert.notDeepEqual(defaulted, cr, "the CRD defaulted something");
    const a = operatorRender(writeCr(`plain-${i}`, cr));
    const b = operatorRender(writeCr(`defaulted-${i}`, defaulted));
    assert.equal(a.status, 0, a.stderr);
    assert.equal(b.status, 0, b.stderr);
    assert.deepEqual(maskTokens(JSON.parse(a.stdout)), maskTokens(JSON.parse(b.stdout)),
                     `variant ${i}: the API server's defaults change the result`);
  });
});

test("the CPU example needs no GPU and no model download", () => {
  const [cr] = readYaml(path.join(EXAMPLES, "orca-cpu-tiny.yaml"));
  assert.match(cr.spec.model.uri, /^synthetic:\/\//);
  const objects = JSON.parse(operatorRender(path.join(EXAMPLES, "orca-cpu-tiny.yaml")).stdout);
  for (const o of objects.filter((x) => x.spec?.template)) {
    const pod = o.spec.template.spec;
    assert.ok(!pod.volumes.some((v) => v.name === "dshm"), `${o.metadata.name}: no GPU, no /dev/shm volume`);
    for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
      assert.equal(c.resources?.limits?.["nvidia.com/gpu"], undefined, `${o.metadata.name}/${c.name}`);
    }
    assert.ok(!pod.volumes.some((v) => v.persistentVolumeClaim), `${o.metadata.name}: needs no PVC`);
  }
});
