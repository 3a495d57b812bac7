// Shared helpers of the deploy validation tests (node --test). Every tool is
// real: helm from .tools/helm, kubernetes-models and ajv from node_modules,
// yamllint from Debian, tsc for unknown-field checks. A missing tool is a
// failure that says to run scripts/bootstrap.sh, never a skip.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = process.env.ORCA_SOURCE_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BUILD = process.env.ORCA_BINARY_DIR ?? path.join(ROOT, "build");
export const HELM = path.join(ROOT, ".tools/helm");
export const CHART = path.join(ROOT, "deploy/helm/orca");
export const CRD_FILE = path.join(ROOT, "deploy/crds/serving.orca.dev_orcadeployments.yaml");
export const OPERATOR = path.join(BUILD, "bin/orca-operator");

const BOOTSTRAP_HINT = "run scripts/bootstrap.sh to install the test tools";

export function requireFile(file, what) {
  if (!fs.existsSync(file)) throw new Error(`${what} not found at ${file}: ${BOOTSTRAP_HINT}`);
}

requireFile(path.join(ROOT, "node_modules/kubernetes-models/package.json"), "node package kubernetes-models");
requireFile(path.join(ROOT, "node_modules/@kubernetes-models/prometheus-operator/package.json"),
            "node package @kubernetes-models/prometheus-operator");
requireFile(path.join(ROOT, "node_modules/@kubernetes-models/keda/package.json"), "node package @kubernetes-models/keda");
requireFile(path.join(ROOT, "node_modules/ajv/package.json"), "node package ajv");
requireFile(path.join(ROOT, "node_modules/yaml/package.json"), "node package yaml");

const YAML = await import("yaml");
const { default: Ajv } = await import("ajv");
const { openapiSchemaToJsonSchema } = await import("@openapi-contrib/openapi-schema-to-json-schema");

/** Every YAML document of `text` as plain objects (empty documents dropped). */
export function parseDocs(text) {
  return YAML.parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length) throw new Error(`YAML error: ${d.errors[0].message}`);
      return d.toJS();
    })
    .filter((o) => o !== null && o !== undefined);
}

export function readYaml(file) {
  return parseDocs(fs.readFileSync(file, "utf8"));
}

/** Runs helm; returns {status, stdout, stderr}. */
export function helm(...args) {
  requireFile(HELM, "helm");
  const r = spawnSync(HELM, args, { encoding: "utf8", env: { ...process.env, HELM_CACHE_HOME: tmpDir("helm-cache"),
                                                               HELM_CONFIG_HOME: tmpDir("helm-config"),
                                                               HELM_DATA_HOME: tmpDir("helm-data") } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let tmpRoot;
export function tmpDir(name) {
  tmpRoot ??= fs.mkdtempSync(path.join(os.tmpdir(), "orca-deploy-test-"));
  const dir = path.join(tmpRoot, name);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Renders the chart with a values file (or none); throws with helm's message on failure.
 * A values file whose text has `# post-render: true` is rendered the operator-less way,
 * through `orca-operator --post-render` as Helm post-renderer.
 */
export function helmTemplate(valuesFile, ...extra) {
  const args = ["template", "orca-test", CHART, "--namespace", "orca-system", "--include-crds", ...extra];
  if (valuesFile) args.push("-f", valuesFile);
  if (valuesFile && isPostRendered(valuesFile)) {
    requireFile(OPERATOR, "orca-operator (build it: ninja -C <build> orca-operator)");
    args.push("--post-renderer", OPERATOR, "--post-renderer-args", "--post-render");
  }
  const r = helm(...args);
  if (r.status !== 0) throw new Error(`helm template ${valuesFile ?? ""} failed:\n${r.stderr}`);
  return r.stdout;
}

/** True for values files meant for the post-renderer (operator-less installs). */
export function isPostRendered(valuesFile) {
  return /^# post-render: true$/m.test(fs.readFileSync(valuesFile, "utf8"));
}

/** Runs orca-operator --render over a file (extra flags after it); returns {status, stdout, stderr}. */
export function operatorRender(file, format = "json", ...flags) {
  requireFile(OPERATOR, "orca-operator (build it: ninja -C <build> orca-operator)");
  const r = spawnSync(OPERATOR, ["--render", file, "--render-format", format, ...flags], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The objects `orca-operator --render` makes of these OrcaDeployments (extra operator flags after). */
export function renderObjects(crs, ...flags) {
  const file = path.join(tmpDir("render"), `${Math.random().toString(36).slice(2)}.yaml`);
  fs.writeFileSync(file, crs.map((c) => YAML.stringify(c)).join("---\n"));
  const r = operatorRender(file, "json", ...flags);
  if (r.status !== 0) throw new Error(`orca-operator --render failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The flags a built binary (build/bin/NAME) lists in --help. */
export function binaryFlags(name) {
  const binary = path.join(BUILD, "bin", name);
  requireFile(binary, `${name} (build it: ninja -C <build> ${name})`);
  const r = spawnSync(binary, ["--help"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${name} --help exited ${r.status}: ${r.stderr}`);
  return new Set([...r.stdout.matchAll(/^\s+--([a-z0-9-]+)/gm)].map((m) => m[1]));
}

/** yamllint over `text`; returns the problems ("" when clean). */
export function yamllint(text) {
  const r = spawnSync("yamllint", ["-c", path.join(ROOT, "tests/deploy/yamllint.yaml"), "-f", "parsable", "-"],
                      { input: text, encoding: "utf8" });
  if (r.error) throw new Error(`yamllint: ${r.error.message}: ${BOOTSTRAP_HINT}`);
  return r.status === 0 ? "" : r.stdout + r.stderr;
}

// ---- schema validation --------------------------------------------------

// The API server prunes fields a structural schema does not declare, silently.
// Tests flag them instead: every object with declared properties is closed.
function closeObjects(schema) {
  if (Array.isArray(schema)) return schema.forEach(closeObjects);
  if (!schema || typeof schema !== "object") return;
  if (schema.properties && schema.additionalProperties === undefined &&
      !schema["x-kubernetes-preserve-unknown-fields"]) {
    schema.additionalProperties = false;
  }
  Object.values(schema).forEach(closeObjects);
}

/**
 * The CRD's openAPIV3Schema as a JSON-schema validator (ajv). `closed` also
 * refuses fields the schema does not declare (which the API server would prune).
 */
export function crdValidator(crd = readYaml(CRD_FILE)[0], { useDefaults = false, closed = true } = {}) {
  const version = crd.spec.versions.find((v) => v.storage);
  const schema = openapiSchemaToJsonSchema(version.schema.openAPIV3Schema);
  delete schema.$schema;  // the converter tags draft-04; ajv validates the same keywords as draft-07
  if (closed) closeObjects(schema.properties?.spec);
  const ajv = new Ajv({ allErrors: true, strict: false, useDefaults });
  ajv.addFormat("int32", { type: "number", validate: (x) => Number.isInteger(x) && x >= -(2 ** 31) && x < 2 ** 31 });
  ajv.addFormat("int64", { type: "number", validate: (x) => Number.isSafeInteger(x) });
  ajv.addFormat("date-time", /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
  return ajv.compile(schema);
}

const crValidate = crdValidator();

function modelModule(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1") {
    return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`;
  }
  if (apiVersion === "keda.sh/v1alpha1") return `@kubernetes-models/keda/keda.sh/v1alpha1/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/**
 * Validates one object: OrcaDeployments against the CRD schema (ajv), every
 * other kind with kubernetes-models (`new Kind(obj).validate()`). Throws with
 * the object's identity and the validator's message.
 */
export async function validateObject(obj) {
  const id = `${obj?.kind}/${obj?.metadata?.name}`;
  if (!obj?.apiVersion || !obj?.kind || !obj?.metadata?.name) throw new Error(`object without apiVersion/kind/name: ${id}`);
  if (obj.apiVersion === "serving.orca.dev/v1alpha1") {
    if (!crValidate(obj)) throw new Error(`${id}: ${JSON.stringify(crValidate.errors)}`);
    return;
  }
  let mod;
  try {
    mod = await import(modelModule(obj.apiVersion, obj.kind));
  } catch (e) {
    throw new Error(`${id}: no model for ${obj.apiVersion} ${obj.kind}`);
  }
  try {
    new mod[obj.kind](obj).validate();
  } catch (e) {
    throw new Error(`${id}: ${e.message}`);
  }
}

/**
 * Fails on unknown fields (typos): type-checks every object literal against
 * the kubernetes-models TypeScript interface of its kind with `satisfies`,
 * which rejects excess properties. OrcaDeployments are skipped (ajv does them).
 */
export function checkKnownFields(objects) {
  const dir = tmpDir(`tscheck-${Math.random().toString(36).slice(2)}`);
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"));
  fs.writeFileSync(path.join(dir, "package.json"), '{"type":"module"}\n');
  fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022",
                       skipLibCheck: true, types: [] },
    files: ["check.ts"],
  }));
  const imports = new Map();
  const lines = [];
  objects.filter((o) => o.apiVersion !== "serving.orca.dev/v1alpha1").forEach((o, i) => {
    const alias = `I${o.kind}_${imports.size}`;
    const mod = modelModule(o.apiVersion, o.kind);
    if (!imports.has(mod)) imports.set(mod, alias);
    lines.push(`// ${o.kind}/${o.metadata?.name}\nexport const o${i} = ${JSON.stringify(o)} satisfies ${imports.get(mod)};`);
  });
  const head = [...imports].map(([mod, alias]) => {
    const kind = mod.split("/").pop();
    return `import type { I${kind} as ${alias} } from "${mod}";`;
  });
  fs.writeFileSync(path.join(dir, "check.ts"), [...head, ...lines].join("\n") + "\n");
  const r = spawnSync(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-p", dir], { encoding: "utf8" });
  if (r.status !== 0) {
    const src = fs.readFileSync(path.join(dir, "check.ts"), "utf8").split("\n");
    const explained = (r.stdout + r.stderr).split("\n").filter(Boolean).map((l) => {
      const m = /check\.ts\((\d+),/.exec(l);
      return m ? `${src[Number(m[1]) - 2]}: ${l}` : l;
    });
    throw new Error(`unknown or mistyped fields:\n${explained.join("\n")}`);
  }
}

/** The flags each binary documents in docs/services.md (the contract). */
export function documentedFlags() {
  const text = fs.readFileSync(path.join(ROOT, "docs/services.md"), "utf8");
  const flags = {};
  let current = null;
  for (const line of text.split("\n")) {
    const h = /^## (orca-[a-z]+)/.exec(line);
    if (h) current = h[1];
    else if (/^## /.test(line)) current = null;
    const f = /^\| `--([a-z0-9-]+)`/.exec(line);
    if (current && f) (flags[current] ??= new Set()).add(f[1]);
  }
  return flags;
}
