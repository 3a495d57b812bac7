// docs/services.md's flag tables against the programs' own --help, so that the two cannot
// drift: every flag a program prints must have a row, every row must name a flag the program
// has, and a default the program prints must be the one the row states. Programs: the four
// services and every `orca` command listed by `orca --help`.
//
// A table belongs to the programs named by the HTML comment right above it,
//   <!-- flags: orca-worker -->            or   <!-- flags: orca bench, orca bench sweep -->
// (a program's flags are the union of its tables). Each row names exactly one flag in its
// first cell and its default in the second; `--help` itself is documented once, in prose.
//   ORCA_BIN_DIR=build/bin node --test tests/docs/services_flags.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = path.join(ROOT, 'docs', 'services.md');
const DOC_NAME = 'docs/services.md';
const SERVICES = ['orca-gateway', 'orca-scheduler', 'orca-worker', 'orca-operator'];

/**
 * Flags of one --help text: name -> { default }, where default is the literal the flag parser
 * appends, "(default: X)" with X a number, true/false or a quoted string (quotes removed), and
 * null when there is none (an empty string or list, or a default described in words).
 */
export function parseHelp(text) {
  const flags = new Map();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; ++i) {
    const m = /^ {2}--([a-z0-9][a-z0-9-]*)(?: <[a-z]+>)?$/.exec(lines[i]);
    if (!m) continue;
    const help = (lines[i + 1] ?? '').trim();
    let literal = null;
    const at = help.lastIndexOf('(default: ');
    if (at >= 0 && help.endsWith(')')) {
      const v = help.slice(at + '(default: '.length, -1);
      if (/^"[^"]*"$/.test(v)) literal = v.slice(1, -1);
      else if (/^(-?[0-9][0-9.e+-]*|true|false)$/.test(v)) literal = v;
    }
    flags.set(m[1], { default: literal });
  }
  flags.delete('help');
  return flags;
}

/** The cells of a Markdown table row (an escaped `\|` stays inside its cell). */
function cells(row) {
  return row.trim().replace(/^\||\|$/g, '').split(/(?<!\\)\|/).map((c) => c.trim());
}

/**
 * The flag tables of a Markdown text: { programs: Map(program -> Map(flag -> { default, line })),
 * problems: [text] } (a marker without a table, a row naming no flag or several, a flag twice).
 */
export function parseDoc(text, name = DOC_NAME) {
  const programs = new Map();
  const problems = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; ++i) {
    const marker = /^<!-- flags: (.+) -->$/.exec(lines[i].trim());
    if (!marker) continue;
    const owners = marker[1].split(',').map((s) => s.trim()).filter(Boolean);
    let j = i + 1;
    while (j < lines.length && lines[j].trim() === '') ++j;
    const header = lines[j]?.startsWith('|') ? cells(lines[j]) : [];
    if (header[0] !== 'flag' || header[1] !== 'default' || !/^\|[-| :]+\|$/.test(lines[j + 1]?.trim() ?? '')) {
      problems.push(`${name}:${i + 1}: the marker is not followed by a table whose columns start "| flag | default |"`);
      continue;
    }
    for (j += 2; j < lines.length && lines[j].trim().startsWith('|'); ++j) {
      const [flagCell, defaultCell = ''] = cells(lines[j]);
      const named = [...flagCell.matchAll(/--([a-z0-9][a-z0-9-]*)/g)].map((m) => m[1]);
      if (named.length !== 1) {
        problems.push(`${name}:${j + 1}: a row names exactly one flag, this one ${named.length}: ${flagCell}`);
        continue;
      }
      for (const owner of owners) {
        if (!programs.has(owner)) programs.set(owner, new Map());
        const table = programs.get(owner);
        if (table.has(named[0])) {
          problems.push(`${name}:${j + 1}: ${owner} --${named[0]} is documented twice (also line ${table.get(named[0]).line})`);
        }
        table.set(named[0], { default: defaultCell.replace(/`/g, '').trim(), line: j + 1 });
      }
    }
  }
  return { programs, problems };
}

/** Every difference between a program's --help flags and its documented ones, one line each. */
export function compareFlags(program, helpFlags, docFlags, name = DOC_NAME) {
  const problems = [];
  for (const [flag, h] of helpFlags) {
    const d = docFlags.get(flag);
    if (!d) {
      problems.push(`${program}: --${flag} is in --help but has no row in ${name}`);
    } else if (h.default !== null && d.default !== h.default) {
      problems.push(`${program}: --${flag} defaults to '${h.default}' (--help) but ${name}:${d.line} says '${d.default}'`);
    }
  }
  for (const [flag, d] of docFlags) {
    if (!helpFlags.has(flag)) problems.push(`${program}: --${flag} is documented (${name}:${d.line}) but not in --help`);
  }
  return problems;
}

/** Runs `bin args... --help`; its stdout, after checking that it exits 0. */
function help(bin, args) {
  const file = path.join(process.env.ORCA_BIN_DIR ?? '', bin);
  assert.ok(process.env.ORCA_BIN_DIR, 'ORCA_BIN_DIR (the build tree bin/) must be set');
  assert.ok(fs.existsSync(file), `${file} is missing: build it (ninja -C build ${bin})`);
  const r = spawnSync(file, [...args, '--help'], { encoding: 'utf8', timeout: 60000 });
  const shown = [bin, ...args, '--help'].join(' ');
  assert.equal(r.signal, null, `${shown} was killed by ${r.signal}`);
  assert.equal(r.status, 0, `${shown} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** The commands `orca --help` lists under "Commands:" (e.g. "serve", "model synth"). */
function orcaCommands() {
  const lines = help('orca', []).split('\n');
  const start = lines.indexOf('Commands:');
  assert.ok(start >= 0, 'orca --help has no "Commands:" section');
  const commands = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break;
    const m = /^ {2}([a-z][a-z-]*(?: [a-z][a-z-]*)*) {2,}\S/.exec(line);
    assert.ok(m, `orca --help: cannot read a command from "${line}" (name, two spaces, description)`);
    commands.push(m[1]);
  }
  assert.ok(commands.length > 0, 'orca --help lists no commands');
  return commands;
}

test('the comparison reports a flag without a row, a row without a flag and another default', () => {
  const helpText = 'Flags:\n  --a <int>\n      x (default: 3)\n  --b <string>\n      y (default: "s")\n' +
    '  --c <list>\n      z (default: in words)\n  --help\n      Show this help.\n';
  const doc = parseDoc('<!-- flags: p -->\n| flag | default | meaning |\n|---|---|---|\n' +
    '| `--a` | `4` | x |\n| `--c` | (none) | z |\n| `--d` | `1` | gone |\n', 'doc.md');
  assert.deepEqual(doc.problems, []);
  assert.deepEqual(compareFlags('p', parseHelp(helpText), doc.programs.get('p'), 'doc.md'), [
    "p: --a defaults to '3' (--help) but doc.md:4 says '4'",
    'p: --b is in --help but has no row in doc.md',
    'p: --d is documented (doc.md:6) but not in --help',
  ]);
  const bad = parseDoc('<!-- flags: p -->\n| flag | default |\n|---|---|\n| `--a`, `--b` | 1 |\n', 'doc.md');
  assert.deepEqual(bad.problems, ['doc.md:4: a row names exactly one flag, this one 2: `--a`, `--b`']);
});

const doc = parseDoc(fs.readFileSync(DOC, 'utf8'));

test(`${DOC_NAME}: every flag table parses`, () => {
  assert.deepEqual(doc.problems, []);
});

test(`${DOC_NAME} documents exactly the programs there are`, () => {
  const programs = [...SERVICES, ...orcaCommands().map((c) => `orca ${c}`)];
  const missing = programs.filter((p) => !doc.programs.has(p));
  const unknown = [...doc.programs.keys()].filter((p) => !programs.includes(p));
  assert.deepEqual({ missing, unknown }, { missing: [], unknown: [] },
    `programs without a flag table in ${DOC_NAME}, and tables of programs that do not exist`);
});

for (const service of SERVICES) {
  test(`${service}: --help and ${DOC_NAME} name the same flags and defaults`, () => {
    const problems = compareFlags(service, parseHelp(help(service, [])), doc.programs.get(service) ?? new Map());
    assert.deepEqual(problems, [], problems.join('\n'));
  });
}

test(`every orca command: --help and ${DOC_NAME} name the same flags and defaults`, async (t) => {
  for (const command of orcaCommands()) {
    await t.test(`orca ${command}`, () => {
      const program = `orca ${command}`;
      const problems = compareFlags(program, parseHelp(help('orca', command.split(' '))),
        doc.programs.get(program) ?? new Map());
      assert.deepEqual(problems, [], problems.join('\n'));
    });
  }
});
