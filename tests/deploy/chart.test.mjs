// The Helm chart, checked with the real helm binary: lint --strict and
// template over good values files, schema rejection of bad ones, every
// rendered object validated (kubernetes-models, the CRD schema, unknown-field
// type check, yamllint), and the chart's own rules (RBAC, flags, copies).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import * as YAML from "yaml";

import {
  CHART, CRD_FILE, OPERATOR, ROOT, checkKnownFields, documentedFlags, helm, helmTemplate, isPostRendered, parseDocs,
  renderObjects, requireFile, tmpDir, validateObject, yamllint,
} from "./lib.mjs";

const VALUES_DIR = path.join(ROOT, "tests/deploy/values");
const valueFiles = fs.readdirSync(VALUES_DIR).filter((f) => f.endsWith(".yaml")).sort();
const good = valueFiles.filter((f) => !f.startsWith("bad-")).map((f) => path.join(VALUES_DIR, f));
const bad = valueFiles.filter((f) => f.startsWith("bad-")).map((f) => path.join(VALUES_DIR, f));

const rendered = new Map(good.map((f) => [path.basename(f), parseDocs(helmTemplate(f))]));
const objectsOf = (name) => rendered.get(name);
const find = (objects, kind, pred = () => true) => objects.filter((o) => o.kind === kind && pred(o));

test("there are good and bad values files", () => {
  assert.ok(good.length >= 6, `good values: ${good}`);
  assert.ok(bad.length >= 6, `bad values: ${bad}`);
  assert.ok(good.some(isPostRendered), "an operator-less (post-rendered) values file");
});

test("helm lint --strict accepts every good values file", () => {
  for (const f of good) {
    const r = helm("lint", "--strict", CHART, "-f", f);
    assert.equal(r.status, 0, `${path.basename(f)}:\n${r.stdout}${r.stderr}`);
  }
});

test("values.schema.json rejects every bad values file, naming the field", () => {
  for (const f of bad) {
    const expect = /# expect: (\S+)/.exec(fs.readFileSync(f, "utf8"))[1];
    for (const cmd of [["lint", "--strict", CHART, "-f", f], ["template", "x", CHART, "-f", f]]) {
      const r = helm(...cmd);
      assert.notEqual(r.status, 0, `${path.basename(f)}: helm ${cmd[0]} accepted it`);
      const out = r.stdout + r.stderr;
      assert.match(out, /schema/, `${path.basename(f)}: not a schema error:\n${out}`);
      assert.ok(out.includes(expect), `${path.basename(f)}: error does not name ${expect}:\n${out}`);
    }
  }
});

test("every rendered object is a valid Kubernetes object", async () => {
  const all = [];
  for (const [name, objects] of rendered) {
    assert.ok(objects.length > 0, name);
    for (const o of objects) {
      await validateObject(o).catch((e) => assert.fail(`${name}: ${e.message}`));
      all.push(o);
    }
  }
  checkKnownFields(all);
});

test("rendered manifests pass yamllint", () => {
  for (const f of good) {
    const problems = yamllint(helmTemplate(f));
    assert.equal(problems, "", `${path.basename(f)}:\n${problems}`);
  }
});

test("names, namespaces and standard labels", () => {
  for (const [name, objects] of rendered) {
    for (const o of objects) {
      const id = `${name}: ${o.kind}/${o.metadata.name}`;
      assert.ok(o.metadata.name.length <= 63, `${id}: name longer than 63`);
      if (o.kind === "CustomResourceDefinition") continue;  // crds/ is not templated
      // What the post-renderer made of an OrcaDeployment carries the operator's labels.
      if (o.metadata.labels?.["app.kubernetes.io/managed-by"] === "orca-operator") {
        assert.ok(isPostRendered(path.join(VALUES_DIR, name)), `${id}: operator-made object in a chart rendering`);
        assert.equal(o.metadata.namespace, "orca-system", id);
        continue;
      }
      const labels = o.metadata.labels ?? {};
      assert.equal(labels["app.kubernetes.io/managed-by"], "Helm", id);
      assert.equal(labels["app.kubernetes.io/instance"], "orca-test", id);
      assert.equal(labels["app.kubernetes.io/name"], "orca", id);
      assert.match(labels["helm.sh/chart"] ?? "", /^orca-\d+\.\d+\.\d+/, id);
      assert.ok(labels["app.kubernetes.io/component"], id);
      if (!["ClusterRole", "ClusterRoleBinding"].includes(o.kind)) assert.ok(o.metadata.namespace, `${id}: no namespace`);
    }
    for (const w of objects.filter((o) => ["Deployment", "StatefulSet"].includes(o.kind))) {
      const sel = w.spec.selector.matchLabels;
      for (const [k, v] of Object.entries(sel)) assert.equal(w.spec.template.metadata.labels[k], v, w.metadata.name);
      const pod = w.spec.template.spec;
      assert.equal(pod.securityContext.runAsNonRoot, true, w.metadata.name);
      for (const c of pod.containers) {
        assert.equal(c.securityContext.readOnlyRootFilesystem, true, c.name);
        assert.ok(c.readinessProbe && c.livenessProbe, `${w.metadata.name}/${c.name}: probes`);
      }
    }
  }
});

test("the chart ships the CRD byte for byte from deploy/crds", () => {
  const copy = path.join(CHART, "crds", path.basename(CRD_FILE));
  assert.ok(fs.existsSync(copy), `missing ${copy}`);
  assert.ok(fs.readFileSync(copy).equals(fs.readFileSync(CRD_FILE)),
            "deploy/helm/orca/crds differs from deploy/crds: copy it again (deploy/helm/sync-chart-files.sh)");
  assert.equal(find(objectsOf("default.yaml"), "CustomResourceDefinition").length, 1);
});

test("dashboards: the chart's copies equal deploy/grafana and become labelled ConfigMaps", () => {
  const src = path.join(ROOT, "deploy/grafana");
  const dst = path.join(CHART, "dashboards");
  const list = (d) => (fs.existsSync(d) ? fs.readdirSync(d).filter((f) => f.endsWith(".json")).sort() : []);
  assert.deepEqual(list(dst), list(src), "deploy/helm/orca/dashboards must mirror deploy/grafana/*.json (deploy/helm/sync-chart-files.sh)");
  for (const f of list(src)) {
    assert.ok(fs.readFileSync(path.join(dst, f)).equals(fs.readFileSync(path.join(src, f))), `${f} differs`);
  }
  const cms = find(objectsOf("default.yaml"), "ConfigMap", (o) => o.metadata.labels?.grafana_dashboard === "1");
  assert.equal(cms.length, list(src).length);
  for (const cm of cms) {
    const [file, body] = Object.entries(cm.data)[0];
    assert.ok(list(src).includes(file), file);
    assert.deepEqual(JSON.parse(body), JSON.parse(fs.readFileSync(path.join(src, file), "utf8")));
  }
  assert.equal(find(objectsOf("no-servicemonitors.yaml"), "ConfigMap", (o) => o.metadata.labels?.grafana_dashboard).length, 0);
});

// The API calls the operator makes (services/operator), as RBAC resource -> verbs; the
// real binary is run against an API server that enforces the rendered rules in
// tests/unit/operator/operator_rbac_test.cc. Here: the chart grants these and no more.
const NEEDED = {
  "serving.orca.dev/orcadeployments": ["get", "list", "watch"],
  "serving.orca.dev/orcadeployments/status": ["update"],
  // Never called: admission needs it for blockOwnerDeletion owner references.
  "serving.orca.dev/orcadeployments/finalizers": ["update"],
  "apps/statefulsets": ["list", "watch", "create", "patch", "delete"],
  "apps/deployments": ["list", "watch", "create", "patch", "delete"],
  "/services": ["list", "create", "patch", "delete"],
  "/configmaps": ["list", "create", "patch", "delete"],
  "policy/poddisruptionbudgets": ["list", "create", "patch", "delete"],
  "networking.k8s.io/networkpolicies": ["list", "create", "patch", "delete"],
  // Each OrcaDeployment's internal-token Secret, created once: no verb that reads, changes or deletes one.
  "/secrets": ["create"],
  "/events": ["create"],
};
const SERVICE_MONITORS = { "monitoring.coreos.com/servicemonitors": ["list", "create", "patch", "delete"] };

function grants(rules) {
  const out = {};
  for (const r of rules) {
    for (const g of r.apiGroups) for (const res of r.resources) for (const v of r.verbs) (out[`${g}/${res}`] ??= new Set()).add(v);
  }
  return out;
}

const operatorArgs = (objects) => find(objects, "Deployment", (o) => o.metadata.labels["app.kubernetes.io/component"] === "operator")[0]
  .spec.template.spec.containers[0].args;

test("RBAC: exactly what the operator needs, cluster-wide or in one namespace, with or without ServiceMonitors", () => {
  const cluster = objectsOf("default.yaml");
  const [cr] = find(cluster, "ClusterRole");
  assert.ok(cr, "default mode has a ClusterRole");
  assert.equal(find(cluster, "Role", (r) => r.metadata.name.endsWith("-operator")).length, 0);
  const ns = objectsOf("namespaced.yaml");
  assert.equal(find(ns, "ClusterRole").length, 0, "namespaced mode has no ClusterRole");
  const [role] = find(ns, "Role", (r) => r.metadata.name.endsWith("-operator"));
  assert.equal(role.metadata.namespace, "team-a");
  const [binding] = find(ns, "RoleBinding", (r) => r.metadata.name.endsWith("-operator"));
  assert.equal(binding.subjects[0].name, "orca-operator");
  assert.equal(binding.subjects[0].namespace, "orca-system");
  const [noSm] = find(objectsOf("no-servicemonitors.yaml"), "ClusterRole");
  for (const [mode, rules, withSm, args] of [["cluster", cr.rules, true, operatorArgs(cluster)],
                                            ["namespaced", role.rules, false, operatorArgs(ns)],
                                            ["no ServiceMonitors", noSm.rules, false, operatorArgs(objectsOf("no-servicemonitors.yaml"))]]) {
    const want = withSm ? { ...NEEDED, ...SERVICE_MONITORS } : NEEDED;
    const g = grants(rules);
    assert.deepEqual(Object.fromEntries(Object.entries(g).map(([k, v]) => [k, [...v].sort()])),
                     Object.fromEntries(Object.entries(want).map(([k, v]) => [k, [...v].sort()])), mode);
    for (const r of rules) {
      assert.ok(!r.verbs.includes("*") && !r.resources.includes("*") && !r.apiGroups.includes("*"), "no wildcards");
      assert.ok(!r.resources.includes("pods"), "no pods");
      if (r.resources.includes("secrets")) assert.deepEqual(r.verbs, ["create"], "Secrets: create only, never read");
    }
    // The operator is told what its RBAC allows (D2: otherwise it lists ServiceMonitors and gets 403).
    assert.ok(args.includes(`--manage-service-monitors=${withSm}`), `${mode}: ${args}`);
  }
  const [le] = find(cluster, "Role", (r) => r.metadata.name.endsWith("-leader-election"));
  assert.deepEqual(le.rules, [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] }]);
  assert.equal(le.metadata.namespace, "orca-system");
});

test("the operator Deployment passes only flags orca-operator has", () => {
  requireFile(OPERATOR, "orca-operator (ninja orca-operator)");
  const help = spawnSync(OPERATOR, ["--help"], { encoding: "utf8" });
  assert.equal(help.status, 0, help.stderr);
  const known = new Set([...help.stdout.matchAll(/--([a-z0-9-]+)/g)].map((m) => m[1]));
  for (const documented of documentedFlags()["orca-operator"] ?? []) assert.ok(known.has(documented), `--${documented}`);
  for (const [name, objects] of rendered) {
    for (const d of find(objects, "Deployment", (o) => o.metadata.labels["app.kubernetes.io/component"] === "operator")) {
      const c = d.spec.template.spec.containers[0];
      assert.deepEqual(c.command, ["orca-operator"]);
      for (const arg of c.args) {
        const flag = /^--([a-z0-9-]+)=/.exec(arg)?.[1];
        assert.ok(flag && known.has(flag), `${name}: ${arg}`);
      }
      assert.equal(c.ports[0].containerPort, 8080);
    }
  }
  const ns = find(objectsOf("namespaced.yaml"), "Deployment")[0].spec.template.spec.containers[0];
  assert.ok(ns.args.includes("--namespace=team-a"));
  assert.equal(ns.image, "registry.example.com/orca:0.1.0-cpu");
});

test("operator-less: the post-renderer turns the OrcaDeployment into the operator's objects", () => {
  const objects = objectsOf("operatorless.yaml");
  assert.equal(find(objects, "OrcaDeployment").length, 0, "replaced by what it becomes");
  assert.equal(find(objects, "Deployment", (o) => o.metadata.labels["app.kubernetes.io/component"] === "operator").length, 0);
  assert.equal(find(objects, "ClusterRole").length, 0);
  const values = YAML.parse(fs.readFileSync(path.join(VALUES_DIR, "operatorless.yaml"), "utf8")).orcaDeployment;
  const groups = find(objects, "StatefulSet", (o) => o.metadata.labels["app.kubernetes.io/component"] === "worker");
  assert.equal(groups.length, values.spec.replicas);
  for (const g of groups) assert.equal(g.spec.replicas, values.spec.parallelism.pipeline);
  assert.equal(find(objects, "NetworkPolicy").length, 3);
  // The same objects the operator renders for that spec (one renderer, one source of truth).
  const cr = { apiVersion: "serving.orca.dev/v1alpha1", kind: "OrcaDeployment",
               metadata: { name: values.name, namespace: "orca-system" }, spec: values.spec };
  const file = path.join(tmpDir("operatorless"), "cr.yaml");
  fs.writeFileSync(file, YAML.stringify(cr));
  const r = spawnSync(OPERATOR, ["--render", file, "--render-format", "json"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(objects.filter((o) => o.metadata.labels?.["app.kubernetes.io/managed-by"] === "orca-operator"),
                   JSON.parse(r.stdout));
  // Nothing of the removed values-rendered mode is left in the chart.
  assert.equal(fs.readdirSync(path.join(CHART, "templates")).filter((f) => f.startsWith("standalone")).length, 0);
});

test("an OrcaDeployment from values is checked against the CRD", async () => {
  const [cr] = find(objectsOf("with-orcadeployment.yaml"), "OrcaDeployment");
  assert.equal(cr.metadata.name, "llama-8b");
  await validateObject(cr);
  const broken = parseDocs(helmTemplate(null, "--set", "orcaDeployment.enabled=true", "--set", "orcaDeployment.spec.parallelism.pipeline=0"));
  const [bad] = find(broken, "OrcaDeployment");
  await assert.rejects(validateObject(bad), /pipeline|minimum/);
});

test("values.yaml documents every key with a `# --` comment", () => {
  const doc = YAML.parseDocument(fs.readFileSync(path.join(CHART, "values.yaml"), "utf8"));
  const undocumented = [];
  const documented = (pair, map, index) => {
    const c = [pair.key?.commentBefore, index === 0 ? map.commentBefore : undefined].filter(Boolean).join("\n");
    return /(^|\n)\s*-- /.test(c);
  };
  const walk = (map, prefix) => {
    map.items.forEach((pair, i) => {
      const key = `${prefix}${pair.key.value}`;
      if (!documented(pair, map, i)) undocumented.push(key);
      // A map whose keys are documented is a section: check inside. Otherwise it is a documented default value.
      if (YAML.isMap(pair.value) && pair.value.items.some((p, j) => documented(p, pair.value, j))) walk(pair.value, `${key}.`);
    });
  };
  walk(doc.contents, "");
  assert.deepEqual(undocumented, []);
  // The schema describes every top-level key of values.yaml.
  const schema = JSON.parse(fs.readFileSync(path.join(CHART, "values.schema.json"), "utf8"));
  for (const pair of doc.contents.items) assert.ok(schema.properties[pair.key.value], `schema lacks ${pair.key.value}`);
});

test("NOTES.txt renders for every values file", () => {
  // helm renders NOTES only on install; render it through a checking template in a copy of the chart.
  const copy = path.join(tmpDir("notes-chart"), "orca");
  fs.cpSync(CHART, copy, { recursive: true });
  fs.writeFileSync(path.join(copy, "templates", "zz-notes-check.yaml"),
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n' +
    '{{ include (print $.Template.BasePath "/NOTES.txt") . | indent 4 }}\n');
  for (const f of good) {
    const r = helm("template", "orca-test", copy, "--namespace", "orca-system", "-f", f, "--show-only", "templates/zz-notes-check.yaml");
    assert.equal(r.status, 0, `${path.basename(f)}: ${r.stderr}`);
    const notes = YAML.parse(r.stdout).data.notes;
    assert.match(notes, /is installed as release "orca-test"/);
    if (path.basename(f) === "with-orcadeployment.yaml") assert.match(notes, /port-forward svc\/llama-8b-gateway/);
  }
});

// Issue 14 item 5 through Helm: every scheduling value of orcaDeployment.spec reaches the flag
// of the binary that reads it, in what the operator (or the post-renderer) makes of it.
test("scheduling values reach the scheduler's and the workers' flags", () => {
  const objects = objectsOf("scheduling-knobs.yaml");
  const [cr] = find(objects, "OrcaDeployment");
  const rendered = renderObjects([cr]);
  const group = find(rendered, "ConfigMap", (o) => o.metadata.labels["serving.orca.dev/revision"])[0];
  const scheduler = YAML.parse(group.data["scheduler.yaml"]);
  const worker = YAML.parse(group.data["worker.yaml"]);
  const expected = { policy: "paged", "max-bs": 32, "n-slots": 8192, "kv-block-size": 32, "max-num-batched-tokens": 512,
                     "max-prefill-slowdown": 2.5, "long-prefill-token-threshold": 128,
                     "enable-prefix-caching": true, "scheduling-order": "priority", "priority-aging-ms": 500,
                     "drain-grace-seconds": 60, "internal-token-file": "/etc/orca-internal-auth/token" };
  for (const [flag, value] of Object.entries(expected)) assert.equal(scheduler[flag], value, `scheduler --${flag}`);
  assert.equal(worker["kv-block-size"], 32, "the workers get the scheduler's block size");
  assert.equal(worker["internal-token-file"], "/etc/orca-internal-auth/token");
  const gatewayCm = find(rendered, "ConfigMap", (o) => o.metadata.name === "chat-paged-gateway")[0];
  const gateway = YAML.parse(gatewayCm.data["gateway.yaml"]);
  assert.equal(gateway["drain-grace-seconds"], 45);
  assert.equal(gateway["internal-token-file"], "/etc/orca-internal-auth/token");
  const gw = find(rendered, "Deployment", (o) => o.metadata.name === "chat-paged-gateway")[0].spec.template.spec;
  assert.ok(gw.terminationGracePeriodSeconds > 45, `gateway grace ${gw.terminationGracePeriodSeconds}`);
});

test("schedulerApiKey.generate: one random Secret, named in the spec; the operator's RBAC unchanged by it", () => {
  const objects = objectsOf("scheduling-knobs.yaml");
  const [secret, ...more] = find(objects, "Secret");
  assert.equal(more.length, 0);
  assert.equal(secret.metadata.name, "chat-paged-scheduler-api-key");
  assert.equal(secret.metadata.namespace, "orca-system");
  assert.deepEqual(Object.keys(secret.data), ["scheduler-api-keys"]);
  assert.match(Buffer.from(secret.data["scheduler-api-keys"], "base64").toString(), /^[A-Za-z0-9]{48}$/);
  const again = find(parseDocs(helmTemplate(path.join(VALUES_DIR, "scheduling-knobs.yaml"))), "Secret")[0];
  assert.notEqual(again.data["scheduler-api-keys"], secret.data["scheduler-api-keys"], "a fresh key where nothing can be looked up");
  const [cr] = find(objects, "OrcaDeployment");
  assert.deepEqual(cr.spec.scheduler.apiKeys, { secretName: "chat-paged-scheduler-api-key", key: "scheduler-api-keys" });
  // The pods mount the Secret; the operator never reads it (its only verb on Secrets is create, for
  // NAME-internal-token when a spec names none).
  const rules = (objs) => find(objs, "ClusterRole").map((r) => r.rules);
  assert.deepEqual(rules(objects), rules(objectsOf("default.yaml")));
});

test("without schedulerApiKey.generate nothing changes; a generated key next to one's own Secret is refused", () => {
  for (const name of ["default.yaml", "with-orcadeployment.yaml", "operatorless.yaml"]) {
    const file = path.join(VALUES_DIR, name);
    const off = helmTemplate(file, "--set", "orcaDeployment.schedulerApiKey.generate=false");
    assert.equal(off, helmTemplate(file), `${name}: generate=false renders exactly the same`);
    assert.equal(find(parseDocs(off), "Secret").length, 0, name);
  }
  // The chart with generate=false and the same spec: the Secret and the apiKeys reference are all that differ.
  const knobs = path.join(VALUES_DIR, "scheduling-knobs.yaml");
  const plain = parseDocs(helmTemplate(knobs, "--set", "orcaDeployment.schedulerApiKey.generate=false"));
  const keyed = objectsOf("scheduling-knobs.yaml").filter((o) => o.kind !== "Secret");
  const [cr] = find(keyed, "OrcaDeployment");
  const stripped = structuredClone(cr);
  delete stripped.spec.scheduler.apiKeys;
  assert.deepEqual(plain, keyed.map((o) => (o === cr ? stripped : o)));
  // Both a generated key and one's own Secret: the template fails, naming both.
  const both = helm("template", "x", CHART, "-f", knobs, "--set", "orcaDeployment.spec.scheduler.apiKeys.secretName=mine");
  assert.notEqual(both.status, 0);
  assert.match(both.stderr, /orcaDeployment\.schedulerApiKey\.generate: spec\.scheduler\.apiKeys already names a Secret/);
});

