#!/usr/bin/env node
// Type-checks every Grafana dashboard in deploy/grafana/ against
// @grafana/schema with tsc, and checks what the types cannot express.
//
// For each dashboard it writes a .ts file into a temporary project:
//   export const dashboard: FromJson<Dashboard> = <the JSON>;
//   export const panel_7_options: FromJson<timeseries.Options> = <panel 7 options>;
//   export const panel_7_custom: FromJson<timeseries.FieldConfig> = <its fieldConfig.defaults.custom>;
// Object literals get TypeScript's excess-property checks, so unknown keys
// fail as well as wrong types. Then, in the same tsc run, mutated copies of a
// dashboard (a wrongly typed field, an unknown key, a bad enum value) must
// fail: that keeps the check itself honest.
//
//   node tests/grafana/check_dashboards.mjs [--root REPO]
// Exit 0: all good; 1: problems (printed); 77: skipped (node tools missing).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const rootFlag = process.argv.indexOf('--root');
const root = rootFlag > 0 ? path.resolve(process.argv[rootFlag + 1]) : path.resolve(here, '../..');
const schemaTypes = path.join(root, 'node_modules/@grafana/schema/dist/types');
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
const dashboardDir = path.join(root, 'deploy/grafana');
const expectedDashboards = ['orca-engine.json', 'orca-overview.json'];

if (!fs.existsSync(path.join(schemaTypes, 'index.d.ts')) || !fs.existsSync(tsc)) {
  console.log(`SKIP: @grafana/schema or typescript missing under ${root}/node_modules (run npm install)`);
  process.exit(77);
}

// Panel plugins whose options and custom field config have schema types.
const panelSchemas = {
  timeseries: { module: 'timeseries', custom: true },
  stat: { module: 'stat', custom: false },
};

const problems = [];

function listPanels(panels) {
  const out = [];
  for (const panel of panels ?? []) {
    out.push(panel);
    if (panel.type === 'row') out.push(...listPanels(panel.panels));
  }
  return out;
}

// Checks that the schema types cannot express.
function checkInvariants(name, dashboard) {
  const fail = (what) => problems.push(`${name}: ${what}`);
  const variables = dashboard.templating?.list ?? [];
  const datasourceVar = variables.find((v) => v.name === 'datasource');
  if (!datasourceVar || datasourceVar.type !== 'datasource' || datasourceVar.query !== 'prometheus') {
    fail("needs a 'datasource' variable of type datasource with query 'prometheus'");
  }
  // namespace / deployment / replica come from the scrape (the operator's ServiceMonitor
  // relabels serving.orca.dev/deployment and /replica into orca_deployment and replica).
  for (const name of ['namespace', 'deployment', 'replica', 'model_name']) {
    const v = variables.find((x) => x.name === name);
    if (!v || v.type !== 'query' || v.datasource?.uid !== '${datasource}') {
      fail(`needs a '${name}' query variable reading from \${datasource}`);
    } else if (name !== 'model_name' && !(v.includeAll && v.allValue === '.*')) {
      fail(`variable '${name}' needs All = '.*' (series scraped without it, e.g. a local stack, still match)`);
    }
  }
  const ids = new Set();
  for (const panel of listPanels(dashboard.panels)) {
    const where = `panel ${panel.id} '${panel.title}'`;
    if (ids.has(panel.id)) fail(`${where}: duplicate panel id`);
    ids.add(panel.id);
    const { x, w } = panel.gridPos ?? {};
    if (!(x >= 0 && w > 0 && x + w <= 24)) fail(`${where}: gridPos must fit in 24 columns`);
    if (panel.type === 'row') continue;
    if (!panelSchemas[panel.type]) fail(`${where}: panel type '${panel.type}' has no schema check here`);
    if (panel.datasource?.uid !== '${datasource}') fail(`${where}: datasource must be \${datasource}`);
    if (!panel.targets?.length) fail(`${where}: no queries`);
    for (const target of panel.targets ?? []) {
      if (target.datasource?.uid !== '${datasource}') fail(`${where}: query ${target.refId} datasource must be \${datasource}`);
      if (typeof target.expr !== 'string' || !target.expr.includes('model_name=~"$model_name"')) {
        fail(`${where}: query ${target.refId} must filter model_name=~"$model_name"`);
        continue;
      }
      for (const selector of target.expr.matchAll(/(orca:[a-z_]+)\{([^}]*)\}/g)) {
        const [, metric, matchers] = selector;
        const needs = ['namespace=~"$namespace"', 'orca_deployment=~"$deployment"'];
        // Gateways serve every replica; everything else runs in one engine replica.
        if (!metric.startsWith('orca:http_')) needs.push('replica=~"$replica"');
        for (const n of needs) if (!matchers.includes(n)) fail(`${where}: query ${target.refId}: ${metric} must filter ${n}`);
      }
      // Per-stage series must stay per replica: `sum by (stage)` would add up stage 0 of every replica.
      for (const by of target.expr.matchAll(/by \(([^)]*)\)/g)) {
        const labels = by[1].split(',').map((x) => x.trim());
        if (labels.includes('stage') && !labels.includes('replica')) {
          fail(`${where}: query ${target.refId} groups by stage without replica (merges the replicas' stages)`);
        }
      }
    }
  }
}

function importPath(file) {
  return JSON.stringify(path.join(schemaTypes, file));
}

function toTypeScript(dashboard) {
  const lines = [
    `import type { Dashboard } from ${importPath('index')};`,
    `import type { FromJson } from ${JSON.stringify(path.join(here, 'from_json'))};`,
  ];
  for (const [type, schema] of Object.entries(panelSchemas)) {
    lines.push(`import type * as ${type} from ${importPath(`raw/composable/${schema.module}/panelcfg/x/types.gen`)};`);
  }
  lines.push(`export const dashboard: FromJson<Dashboard> = ${JSON.stringify(dashboard, null, 2)};`);
  for (const panel of listPanels(dashboard.panels)) {
    const schema = panelSchemas[panel.type];
    if (!schema) continue;
    const id = String(panel.id).replace(/\W/g, '_');
    lines.push(`export const panel_${id}_options: FromJson<${panel.type}.Options> = ${JSON.stringify(panel.options ?? {})};`);
    if (schema.custom) {
      lines.push(`export const panel_${id}_custom: FromJson<${panel.type}.FieldConfig> = ${JSON.stringify(panel.fieldConfig?.defaults?.custom ?? {})};`);
    }
  }
  return lines.join('\n') + '\n';
}

// Mutations of a valid dashboard that tsc must reject.
const mutations = {
  schema_version_string: (d) => { d.schemaVersion = String(d.schemaVersion); },
  unknown_top_level_key: (d) => { d.titel = d.title; },
  grid_width_string: (d) => { d.panels[1].gridPos.w = '6'; },
  variable_type_unknown: (d) => { d.templating.list[1].type = 'prometheus'; },
  threshold_mode_unknown: (d) => {
    const panel = listPanels(d.panels).find((p) => p.fieldConfig?.defaults?.thresholds);
    panel.fieldConfig.defaults.thresholds.mode = 'relative-ish';
  },
  legend_placement_unknown: (d) => {
    listPanels(d.panels).find((p) => p.type === 'timeseries').options.legend.placement = 'middle';
  },
  draw_style_unknown: (d) => {
    listPanels(d.panels).find((p) => p.type === 'timeseries').fieldConfig.defaults.custom.drawStyle = 'dots';
  },
  stat_option_missing: (d) => {
    delete listPanels(d.panels).find((p) => p.type === 'stat').options.colorMode;
  },
};

// Mutations that the invariants (not tsc) must reject, on the engine dashboard.
const invariantMutations = {
  stage_merges_replicas: (d) => {
    const t = listPanels(d.panels).flatMap((p) => p.targets ?? []).find((x) => x.expr.includes('stage'));
    t.expr = t.expr.replaceAll('orca_deployment, replica, stage', 'stage');
  },
  replica_filter_missing: (d) => {
    const t = listPanels(d.panels).flatMap((p) => p.targets ?? []).find((x) => x.expr.includes('replica=~'));
    t.expr = t.expr.replaceAll(',replica=~"$replica"', '');
  },
  namespace_variable_missing: (d) => { d.templating.list = d.templating.list.filter((v) => v.name !== 'namespace'); },
};

const files = fs.readdirSync(dashboardDir).filter((f) => f.endsWith('.json')).sort();
for (const expected of expectedDashboards) {
  if (!files.includes(expected)) problems.push(`missing deploy/grafana/${expected}`);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-grafana-'));
const real = new Map();       // generated file -> dashboard file
const mutated = new Map();    // generated file -> mutation name
let firstDashboard = null;
for (const file of files) {
  let dashboard;
  try {
    dashboard = JSON.parse(fs.readFileSync(path.join(dashboardDir, file), 'utf8'));
  } catch (e) {
    problems.push(`${file}: not valid JSON: ${e.message}`);
    continue;
  }
  checkInvariants(file, dashboard);
  if (file === 'orca-engine.json') {
    for (const [name, mutate] of Object.entries(invariantMutations)) {
      const copy = structuredClone(dashboard);
      mutate(copy);
      const before = problems.length;
      checkInvariants(`mutation ${name}`, copy);
      const caught = problems.length > before;
      problems.length = before;  // the mutation's own findings are expected
      if (!caught) problems.push(`invariant mutation '${name}' was not caught by the checks above`);
    }
  }
  const out = path.join(tmp, file.replace(/\W/g, '_') + '.ts');
  fs.writeFileSync(out, toTypeScript(dashboard));
  real.set(out, file);
  if (file === 'orca-overview.json') firstDashboard = dashboard;
}
if (firstDashboard) {
  for (const [name, mutate] of Object.entries(mutations)) {
    const copy = structuredClone(firstDashboard);
    mutate(copy);
    const out = path.join(tmp, `mutation_${name}.ts`);
    fs.writeFileSync(out, toTypeScript(copy));
    mutated.set(out, name);
  }
}

fs.writeFileSync(path.join(tmp, 'tsconfig.json'), JSON.stringify({
  extends: path.join(here, 'tsconfig.json'),
  files: [...real.keys(), ...mutated.keys()],
}, null, 2));
const run = spawnSync(process.execPath, [tsc, '-p', path.join(tmp, 'tsconfig.json'), '--pretty', 'false'],
                      { encoding: 'utf8', cwd: tmp });
if (run.error) {
  problems.push(`cannot run tsc: ${run.error.message}`);
}
const errorsByFile = new Map();
const unattributed = [];
for (const line of (run.stdout + run.stderr).split('\n')) {
  const match = /^(.*?)\(\d+,\d+\): error TS\d+:/.exec(line);
  if (!match) {
    if (/error TS\d+/.test(line)) unattributed.push(line);
    continue;
  }
  const file = path.resolve(tmp, match[1]);  // tsc prints paths relative to its cwd
  if (!errorsByFile.has(file)) errorsByFile.set(file, []);
  errorsByFile.get(file).push(line);
}
for (const line of unattributed) problems.push(`tsc: ${line}`);
for (const [file, dashboard] of real) {
  for (const error of errorsByFile.get(file) ?? []) problems.push(`${dashboard}: ${error}`);
}
for (const [file, name] of mutated) {
  if (!errorsByFile.get(file)?.length) problems.push(`mutation '${name}' was not rejected by tsc: the type check is too weak`);
}
for (const file of errorsByFile.keys()) {
  if (!real.has(file) && !mutated.has(file)) problems.push(`tsc errors in ${file}: ${errorsByFile.get(file)[0]}`);
}

fs.rmSync(tmp, { recursive: true, force: true });
for (const problem of problems) console.log(`FAIL ${problem}`);
const checks = real.size + mutated.size;
console.log(`grafana dashboards: ${real.size} type-checked, ${mutated.size} mutations rejected by tsc and ` +
            `${Object.keys(invariantMutations).length} by the invariants, as expected`);
console.log(`${problems.length ? 0 : checks} passed, ${problems.length} failed`);
process.exit(problems.length ? 1 : 0);
