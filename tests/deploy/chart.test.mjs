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
  CHART, CRD_FILE, OPERATOR, ROOT, checkKnownFields, documentedFlags, helm, helmTemplate, parseDocs, requireFile,
  tmpDir, validateObject, yamllint,
} from "./lib.mjs";

const VALUES_DIR = path.join(ROOT, "tests/deploy/values");
const valueFiles = fs.readdirSync(VALUES_DIR).filter((f) => f.endsWith(".yaml")).sort();
const good = valueFiles.filter((f) => !f.startsWith("bad-")).map((f) => path.join(VALUES_DIR, f));
const bad = valueFiles.filter((f) => f.startsWith("bad-")).map((f) => path.join(VALUES_DIR, f));

const rendered = new Map(good.map((f) => [path.basename(f), parseDocs(helmTemplate(f))]));
const objectsOf = (name) => rendered.get(name);
const find = (objects, kind, pred = () => true) => objects.filter((o) => o.kind === kind && pred(o));

test("there are good and bad values files", () => {
  assert.ok(good.length >= 5, `good values: ${good}`);
  assert.ok(bad.length >= 6, `bad values: ${bad}`);
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
  assert.equal(find(objectsOf("standalone-pvc.yaml"), "ConfigMap", (o) => o.metadata.labels?.grafana_dashboard).length, 0);
});

// The API calls the operator makes (services/operator), as RBAC resource -> verbs.
const NEEDED = {
  "serving.orca.dev/orcadeployments": ["get", "list", "watch"],
  "serving.orca.dev/orcadeployments/status": ["update"],
  "apps/statefulsets": ["list", "watch", "patch", "delete"],
  "apps/deployments": ["list", "watch", "patch", "delete"],
  "/services": ["list", "patch", "delete"],
  "/configmaps": ["list", "patch", "delete"],
  "/events": ["create"],
};

function grants(rules) {
  const out = {};
  for (const r of rules) {
    for (const g of r.apiGroups) for (const res of r.resources) (out[`${g}/${res}`] ??= new Set(r.verbs));
  }
  return out;
}

test("RBAC: exactly what the operator needs, cluster-wide or in one namespace", () => {
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
  for (const rules of [cr.rules, role.rules]) {
    const g = grants(rules);
    for (const [res, verbs] of Object.entries(NEEDED)) {
      for (const v of verbs) assert.ok(g[res]?.has(v), `${res} ${v} not granted`);
    }
    for (const r of rules) {
      assert.ok(!r.verbs.includes("*") && !r.resources.includes("*") && !r.apiGroups.includes("*"), "no wildcards");
      assert.ok(!r.resources.includes("secrets"), "the operator never reads Secrets");
    }
  }
  assert.ok(grants(cr.rules)["monitoring.coreos.com/servicemonitors"], "ServiceMonitors when manageServiceMonitors");
  assert.ok(!grants(role.rules)["monitoring.coreos.com/servicemonitors"], "no ServiceMonitors when disabled");
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

test("standalone mode: one engine replica wired through the documented flags", () => {
  const flags = documentedFlags();
  for (const name of ["standalone.yaml", "standalone-pvc.yaml"]) {
    const objects = objectsOf(name);
    const values = YAML.parse(fs.readFileSync(path.join(VALUES_DIR, name), "utf8")).standalone;
    const [cm] = find(objects, "ConfigMap", (o) => o.metadata.name.endsWith("-standalone-config"));
    const files = Object.fromEntries(Object.entries(cm.data).map(([k, v]) => [k, YAML.parse(v)]));
    for (const [file, binary] of [["gateway.yaml", "orca-gateway"], ["scheduler.yaml", "orca-scheduler"], ["worker.yaml", "orca-worker"]]) {
      for (const key of Object.keys(files[file])) assert.ok(flags[binary]?.has(key), `${name}: ${file}: ${key} is not a flag of ${binary}`);
    }
    const [sts] = find(objects, "StatefulSet");
    const [headless] = find(objects, "Service", (s) => s.spec.clusterIP === "None");
    assert.equal(sts.spec.replicas, values.pipeline);
    assert.equal(sts.spec.serviceName, headless.metadata.name);
    assert.equal(sts.spec.podManagementPolicy, "Parallel");
    const stages = files["worker.yaml"].workers.split(",");
    assert.equal(stages.length, values.pipeline);
    stages.forEach((s, i) => assert.equal(s, `${sts.metadata.name}-${i}.${headless.metadata.name}.orca-system.svc.cluster.local:7100`));
    assert.equal(files["scheduler.yaml"].workers, files["worker.yaml"].workers);
    assert.equal(files["worker.yaml"]["tensor-parallel"], values.tensor);
    const [sched] = find(objects, "Service", (s) => s.metadata.labels["app.kubernetes.io/component"] === "scheduler");
    assert.equal(files["gateway.yaml"].schedulers, `${sched.metadata.name}.orca-system.svc.cluster.local:7000`);
    assert.equal(find(objects, "Deployment", (d) => d.metadata.labels["app.kubernetes.io/component"] === "scheduler")[0]
      .spec.strategy.type, "Recreate");
  }
  const pvc = find(objectsOf("standalone-pvc.yaml"), "StatefulSet")[0].spec.template.spec;
  assert.equal(pvc.initContainers, undefined);
  assert.equal(pvc.volumes.find((v) => v.name === "model").persistentVolumeClaim.claimName, "model-store");
  assert.equal(pvc.containers[0].resources.limits["nvidia.com/gpu"], 4);
  const synth = find(objectsOf("standalone.yaml"), "StatefulSet")[0].spec.template.spec;
  assert.deepEqual(synth.initContainers[0].args.slice(0, 4), ["model", "synth", "--out", "/models/synthetic"]);
  assert.equal(find(objectsOf("standalone.yaml"), "Deployment", (o) => o.metadata.labels["app.kubernetes.io/component"] === "operator").length, 0);
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
