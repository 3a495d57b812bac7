// The Dockerfiles cannot be built here (no container engine), so their
// contract with the build is checked instead: they build and copy exactly the
// binaries the CMake build produces, install the build packages of
// scripts/bootstrap.sh, ship the runtime libraries of those packages, run as
// non-root, and give every service target its documented ports and a probe.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { BUILD, ROOT, requireFile } from "./lib.mjs";

const BINARIES = ["orca", "orca-gateway", "orca-scheduler", "orca-worker", "orca-operator"];
// Packages bootstrap.sh installs for tests, benchmarks, plots and fetching; not needed to build the binaries.
const NOT_FOR_BUILD = new Set(["git", "unzip", "curl", "libgtest-dev", "libgmock-dev", "googletest", "libbenchmark-dev",
                               "prometheus", "gnuplot-nox", "yamllint"]);
const SERVICES = {
  gateway: { binary: "orca-gateway", ports: [8000, 8001], health: 8000 },
  scheduler: { binary: "orca-scheduler", ports: [7000, 7001], health: 7001 },
  worker: { binary: "orca-worker", ports: [7100, 7101], health: 7101 },
  operator: { binary: "orca-operator", ports: [8080], health: 8080 },
  orca: { binary: "orca", ports: [8000], health: 8000 },
};

/** Splits a Dockerfile into stages with their instructions (continuations joined). */
function parseDockerfile(file) {
  const text = fs.readFileSync(file, "utf8").replace(/\\\n/g, " ");
  const stages = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const [instr, ...rest] = line.split(/\s+/);
    const args = rest.join(" ");
    if (instr === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ from: m[1], name: m[2], lines: [] });
    } else if (stages.length) {
      stages.at(-1).lines.push({ instr, args });
    }
  }
  return stages;
}

const aptPackages = (stage) => stage.lines.filter((l) => l.instr === "RUN")
  .flatMap((l) => [...l.args.matchAll(/apt-get install ((?:-\S+\s+)*)([^&]+)/g)].flatMap((m) => m[2].trim().split(/\s+/)));

function bootstrapPackages() {
  const text = fs.readFileSync(path.join(ROOT, "scripts/bootstrap.sh"), "utf8");
  const block = /APT_PACKAGES=\(([\s\S]*?)\)/.exec(text)[1];
  return block.split("\n").map((l) => l.replace(/#.*/, "")).join(" ").split(/\s+/).filter(Boolean);
}

function builtBinaries() {
  const ninja = path.join(BUILD, "build.ninja");
  requireFile(ninja, "the CMake build graph (configure the build first)");
  return new Set([...fs.readFileSync(ninja, "utf8").matchAll(/^build bin\/([A-Za-z0-9_.-]+):/gm)].map((m) => m[1]));
}

// The runtime libraries a -dev package pulls in (from apt's metadata on this Debian 12 machine).
const runtimeLibsCache = new Map();
function runtimeLibsOf(devPackage) {
  if (!runtimeLibsCache.has(devPackage)) runtimeLibsCache.set(devPackage, queryRuntimeLibs(devPackage));
  return runtimeLibsCache.get(devPackage);
}

function queryRuntimeLibs(devPackage) {
  const r = spawnSync("apt-cache", ["depends", "--no-recommends", "--no-suggests", devPackage], { encoding: "utf8" });
  assert.equal(r.status, 0, `apt-cache depends ${devPackage}: ${r.stderr}`);
  return [...r.stdout.matchAll(/^\s+Depends: (\S+)/gm)].map((m) => m[1])
    .filter((p) => /^lib/.test(p) && !p.endsWith("-dev"));
}

for (const flavour of ["Dockerfile", "Dockerfile.cuda"]) {
  const file = path.join(ROOT, "deploy/docker", flavour);
  const stages = parseDockerfile(file);
  const stage = (name) => stages.find((s) => s.name === name);

  test(`${flavour}: builds and ships exactly the binaries the CMake build produces`, () => {
    const built = builtBinaries();
    for (const b of BINARIES) assert.ok(built.has(b), `${b} is not a target of this CMake build`);
    const run = stage("build").lines.filter((l) => l.instr === "RUN").map((l) => l.args).join(" ");
    const targets = /ninja -C \/build ([\w\s-]+)/.exec(run)[1].trim().split(/\s+/);
    assert.deepEqual(targets.sort(), [...BINARIES].sort());
    assert.match(run, /cmake -S \. -B \/build -G Ninja -DCMAKE_BUILD_TYPE=Release/);
    assert.match(run, flavour.endsWith("cuda") ? /-DORCA_ENABLE_CUDA=ON/ : /-DORCA_ENABLE_CUDA=OFF/);
    const copy = stage("runtime").lines.find((l) => l.instr === "COPY");
    const copied = [...copy.args.matchAll(/\/build\/bin\/(\S+)/g)].map((m) => m[1]);
    assert.deepEqual(copied.sort(), [...BINARIES].sort());
  });

  test(`${flavour}: the builder installs bootstrap.sh's build packages`, () => {
    const expected = bootstrapPackages().filter((p) => !NOT_FOR_BUILD.has(p) && p !== "nodejs" && p !== "npm");
    const extra = flavour.endsWith("cuda") ? ["nvidia-cuda-toolkit"] : [];
    assert.deepEqual(aptPackages(stage("build")).sort(), [...expected, ...extra].sort());
  });

  test(`${flavour}: the runtime is slim Debian with the libraries of the build packages`, () => {
    const runtime = stage("runtime");
    assert.match(runtime.from, /^debian:\$\{DEBIAN_RELEASE\}-slim$/);
    assert.match(fs.readFileSync(file, "utf8"), /^ARG DEBIAN_RELEASE=12$/m);
    assert.match(stage("build").from, /^debian:\$\{DEBIAN_RELEASE\}$/);
    const installed = new Set(aptPackages(runtime));
    for (const dev of aptPackages(stage("build")).filter((p) => /^lib.*-dev$/.test(p) && !p.startsWith("libboost") && p !== "nlohmann-json3-dev")) {
      for (const lib of runtimeLibsOf(dev)) {
        if (/^libgrpc\d|^libprotobuf-lite|^libssl|^libc6|^libstdc|^libgcc/.test(lib)) continue;  // pulled in by what is listed
        assert.ok(installed.has(lib), `${flavour}: ${dev} needs ${lib} at run time`);
      }
    }
    assert.ok(installed.has("libgomp1"), "OpenMP runtime");
    if (flavour.endsWith("cuda")) for (const lib of ["libcudart11.0", "libcublas11"]) assert.ok(installed.has(lib), lib);
    const user = runtime.lines.find((l) => l.instr === "USER");
    assert.ok(user && !/^(root|0)(:|$)/.test(user.args), "runs as non-root");
  });

  test(`${flavour}: every service target has its entrypoint, documented ports and a health check`, () => {
    const docs = fs.readFileSync(path.join(ROOT, "docs/services.md"), "utf8");
    for (const [target, want] of Object.entries(SERVICES)) {
      const s = stage(target);
      assert.ok(s, `no target ${target}`);
      assert.equal(s.from, "runtime");
      const entry = JSON.parse(s.lines.find((l) => l.instr === "ENTRYPOINT").args);
      assert.equal(entry[0], want.binary);
      const exposed = s.lines.filter((l) => l.instr === "EXPOSE").flatMap((l) => l.args.split(/\s+/).map(Number));
      assert.deepEqual(exposed, want.ports);
      for (const p of want.ports) {
        if (target !== "orca") assert.match(docs, new RegExp(`\\| ${want.binary} +\\| ${p} `), `${want.binary}:${p} in docs/services.md`);
      }
      const health = s.lines.find((l) => l.instr === "HEALTHCHECK");
      assert.ok(health, `${target}: HEALTHCHECK`);
      assert.match(health.args, new RegExp(`http://127\\.0\\.0\\.1:${want.health}/health`));
    }
    assert.equal(stages.at(-1).name, "orca", "the default target carries every binary");
  });

  test(`${flavour}: the build context leaves out build trees and tools`, () => {
    const ignore = fs.readFileSync(`${file}.dockerignore`, "utf8");
    for (const p of ["**/build", "**/build-*", "node_modules", ".tools", ".git"]) assert.ok(ignore.split("\n").includes(p), p);
  });
}
