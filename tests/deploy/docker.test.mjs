// The Dockerfiles cannot be built here (no container engine), so their
// contract with the build is checked instead, and every step that can run here
// does:
// - the builder runs scripts/bootstrap.sh (the same package list and CMake
//   invocation the fresh-machine check runs), builds and copies exactly the
//   binaries the CMake build produces;
// - the runtime ships the libraries those binaries load (apt metadata and the
//   ELF NEEDED entries of this build's binaries), runs as non-root, and every
//   service target has its documented ports and a probe;
// - two Dockerfile linters from npm (dockerfile-utils: the Docker language
//   server's validator; dockerfilelint: best practices) pass, and the
//   hadolint rules no npm or Debian linter covers are checked here;
// - Dockerfile.cuda's CMake configure runs with its own arguments against the
//   CUDA 13 toolkit of this machine, with NCCL present (laid out as in the
//   image) and absent (hidden in a private mount namespace, and switched off).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";

import { BUILD, ROOT, requireFile } from "./lib.mjs";

requireFile(path.join(ROOT, "node_modules/dockerfilelint/package.json"), "node package dockerfilelint");
requireFile(path.join(ROOT, "node_modules/dockerfile-utils/package.json"), "node package dockerfile-utils");
const { validate: validateDockerfile } = await import("dockerfile-utils");

const BINARIES = ["orca", "orca-gateway", "orca-scheduler", "orca-worker", "orca-operator"];
const SERVICES = {
  gateway: { binary: "orca-gateway", ports: [8000, 8001], health: 8000 },
  scheduler: { binary: "orca-scheduler", ports: [7000, 7001], health: 7001 },
  worker: { binary: "orca-worker", ports: [7100, 7101, 7200], health: 7101 },
  operator: { binary: "orca-operator", ports: [8080], health: 8080 },
  orca: { binary: "orca", ports: [8000], health: 8000 },
};

/** Splits a Dockerfile into global ARGs and stages with their instructions (continuations joined). */
function parseDockerfile(file) {
  const text = fs.readFileSync(file, "utf8").replace(/\\\n/g, " ");
  const args = {};
  const stages = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const [instr, ...rest] = line.split(/\s+/);
    const rest_ = rest.join(" ");
    if (instr === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest_);
      stages.push({ from: m[1], name: m[2], lines: [] });
    } else if (stages.length) {
      stages.at(-1).lines.push({ instr, args: rest_ });
    } else if (instr === "ARG") {
      const [k, v] = rest_.split("=");
      args[k] = v;
    }
  }
  return { args, stages };
}

const runs = (stage) => stage.lines.filter((l) => l.instr === "RUN").map((l) => l.args);
const aptInstalls = (stage) => runs(stage)
  .flatMap((r) => [...r.matchAll(/apt-get install ((?:-\S+\s+)*)([^&]+)/g)].flatMap((m) => m[2].trim().split(/\s+/)));

/** A bash array of scripts/bootstrap.sh, e.g. BUILD_PACKAGES. */
function bootstrapArray(name) {
  const text = fs.readFileSync(path.join(ROOT, "scripts/bootstrap.sh"), "utf8");
  const block = new RegExp(`^${name}=\\(([\\s\\S]*?)\\)`, "m").exec(text)[1];
  return block.split("\n").map((l) => l.replace(/#.*/, "")).join(" ").split(/\s+/).filter(Boolean);
}

/** The environment words and command of the build stage's `bootstrap.sh --image-build` RUN. */
function imageBuildRun(stage) {
  const run = runs(stage).find((r) => /scripts\/bootstrap\.sh --image-build/.test(r));
  assert.ok(run, "the build stage runs scripts/bootstrap.sh --image-build");
  const env = {};
  for (const m of run.matchAll(/(?:^|\s)([A-Z_]+)=("([^"]*)"|\S+)/g)) env[m[1]] = m[3] ?? m[2];
  return { run, env };
}

function builtBinaries() {
  const ninja = path.join(BUILD, "build.ninja");
  requireFile(ninja, "the CMake build graph (configure the build first)");
  return new Set([...fs.readFileSync(ninja, "utf8").matchAll(/^build bin\/([A-Za-z0-9_.-]+):/gm)].map((m) => m[1]));
}

const aptCache = new Map();
function aptDepends(pkgs, recurse = false) {
  const key = `${pkgs}/${recurse}`;
  if (!aptCache.has(key)) {
    const flags = ["--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"];
    const r = spawnSync("apt-cache", ["depends", ...(recurse ? ["--recurse"] : []), ...flags, ...[pkgs].flat()],
                        { encoding: "utf8", maxBuffer: 64 << 20 });
    assert.equal(r.status, 0, `apt-cache depends ${pkgs}: ${r.stderr}`);
    aptCache.set(key, r.stdout);
  }
  return aptCache.get(key);
}
// The runtime libraries each of `devs` pulls in (from apt's metadata on this Debian 12 machine), one apt-cache call.
function runtimeLibsOf(devs) {
  const out = new Map();
  let current = null;
  for (const line of aptDepends(devs).split("\n")) {
    if (/^\S/.test(line)) out.set((current = line.trim()), []);
    const m = /^\s+Depends: (\S+)/.exec(line);
    if (m && current && /^lib/.test(m[1]) && !m[1].endsWith("-dev")) out.get(current).push(m[1]);
  }
  return out;
}
// Every package installing `pkgs` brings in (the packages themselves included).
function closure(pkgs) {
  const out = new Set(pkgs);
  for (const m of aptDepends(pkgs, true).matchAll(/^(?:\s+\|?Depends: <?)?([a-z0-9][a-z0-9.+-]+)>?$/gm)) out.add(m[1]);
  return out;
}

/** Where each NEEDED library of an ELF binary resolves (ldd), by soname. */
const lddCache = new Map();
function neededLibraries(binary) {
  if (!lddCache.has(binary)) lddCache.set(binary, ldd(binary));
  return lddCache.get(binary);
}
function ldd(binary) {
  const r = spawnSync("ldd", [binary], { encoding: "utf8" });
  assert.equal(r.status, 0, `ldd ${binary}: ${r.stderr}`);
  const out = new Map();
  for (const m of r.stdout.matchAll(/^\s+(\S+) => (\S+)/gm)) out.set(m[1], m[2]);
  return out;
}
// The Debian package owning each file (one dpkg -S call). Merged /usr: dpkg may know a library under /lib or
// /usr/lib, by its link or its target.
function debianOwners(files) {
  const variants = new Map(files.map((f) => [f, [f, fs.realpathSync(f)].flatMap((v) => [v, v.startsWith("/usr/lib/") ? v.slice(4) : `/usr${v}`])]));
  const r = spawnSync("dpkg", ["-S", ...new Set([...variants.values()].flat())], { encoding: "utf8", maxBuffer: 16 << 20 });
  const ownerOfPath = new Map();
  for (const line of r.stdout.split("\n")) {
    const m = /^([^:,\s]+)(?::\S+)?(?:, [^:]+)*: (\S+)$/.exec(line);
    if (m) ownerOfPath.set(m[2], m[1]);
  }
  return new Map(files.map((f) => [f, variants.get(f).map((v) => ownerOfPath.get(v)).find(Boolean) ?? null]));
}

// What each base image (by repository) is: every stage's FROM resolved through the global ARGs.
const resolveFrom = (from, args) => from.replace(/\$\{(\w+)\}/g, (_, k) => args[k] ?? "");

for (const flavour of ["Dockerfile", "Dockerfile.cuda"]) {
  const cuda = flavour.endsWith("cuda");
  const file = path.join(ROOT, "deploy/docker", flavour);
  const { args, stages } = parseDockerfile(file);
  const stage = (name) => stages.find((s) => s.name === name);

  test(`${flavour}: builds with scripts/bootstrap.sh and ships exactly the binaries the CMake build produces`, () => {
    const built = builtBinaries();
    for (const b of BINARIES) assert.ok(built.has(b), `${b} is not a target of this CMake build`);
    const { env } = imageBuildRun(stage("build"));
    const text = fs.readFileSync(path.join(ROOT, "scripts/bootstrap.sh"), "utf8");
    const targets = /ORCA_NINJA_TARGETS:=([^}]+)\}/.exec(text)[1].trim().split(/\s+/);
    assert.deepEqual([...targets].sort(), [...BINARIES].sort(), "bootstrap.sh --image-build builds the five binaries");
    assert.equal(env.ORCA_NINJA_TARGETS, undefined, "the image builds bootstrap's default targets");
    assert.equal(env.ORCA_BUILD_DIR, "/build");
    assert.match(env.ORCA_CMAKE_ARGS, cuda ? /-DORCA_ENABLE_CUDA=ON/ : /-DORCA_ENABLE_CUDA=OFF/);
    if (cuda) assert.match(env.ORCA_CMAKE_ARGS, /-DORCA_ENABLE_NCCL=ON/, "the CUDA image requires NCCL");
    const copy = stage("runtime").lines.find((l) => l.instr === "COPY" && /--from=build/.test(l.args));
    const copied = [...copy.args.matchAll(/\/build\/bin\/(\S+)/g)].map((m) => m[1]);
    assert.deepEqual(copied.sort(), [...BINARIES].sort());
  });

  test(`${flavour}: the builder's packages are bootstrap.sh's BUILD_PACKAGES, which a fresh machine installs too`, () => {
    const build = stage("build");
    assert.ok(runs(build).some((r) => /^\/src\/scripts\/bootstrap\.sh --image-deps\b/.test(r)),
              "the build stage installs packages with scripts/bootstrap.sh --image-deps");
    assert.deepEqual(aptInstalls(build), [], "no package list of its own in the build stage");
    const copyScript = build.lines.find((l) => l.instr === "COPY" && /scripts\/bootstrap\.sh/.test(l.args));
    assert.equal(copyScript?.args, "scripts/bootstrap.sh /src/scripts/bootstrap.sh");
    // bootstrap.sh's default mode (README command (b), the fresh-machine check) installs the same array.
    const text = fs.readFileSync(path.join(ROOT, "scripts/bootstrap.sh"), "utf8");
    assert.match(text, /^APT_PACKAGES=\("\$\{BUILD_PACKAGES\[@\]\}" "\$\{TEST_PACKAGES\[@\]\}"\)$/m);
    assert.match(text, /image-deps\)\n\s+install_packages "\$\{BUILD_PACKAGES\[@\]\}"/);
  });

  test(`${flavour}: the runtime is slim Debian with the libraries of the build packages`, () => {
    const runtime = stage("runtime");
    assert.equal(runtime.from, "debian:${DEBIAN_RELEASE}-slim");
    assert.equal(stage("build").from, "debian:${DEBIAN_RELEASE}");
    const release = fs.readFileSync("/etc/debian_version", "utf8").trim().split(".")[0];
    assert.equal(args.DEBIAN_RELEASE.split(".")[0], release, "the images use this machine's Debian release");
    const installed = new Set(aptInstalls(runtime));
    const devs = bootstrapArray("BUILD_PACKAGES").filter((p) => /^lib.*-dev$/.test(p) && !p.startsWith("libboost"));
    const libsOf = runtimeLibsOf(devs);
    for (const dev of devs) {
      assert.ok(libsOf.has(dev), `apt knows ${dev}`);
      for (const lib of libsOf.get(dev)) {
        if (/^libgrpc\d|^libprotobuf-lite|^libssl|^libc6|^libstdc|^libgcc/.test(lib)) continue;  // pulled in by what is listed
        assert.ok(installed.has(lib), `${flavour}: ${dev} needs ${lib} at run time`);
      }
    }
    assert.ok(installed.has("libgomp1"), "OpenMP runtime");
    const user = runtime.lines.find((l) => l.instr === "USER");
    assert.ok(user && !/^(root|0)(:|$)/.test(user.args), "runs as non-root");
  });

  test(`${flavour}: every library the binaries load is in the runtime image`, () => {
    const runtime = stage("runtime");
    const packages = closure(aptInstalls(runtime));
    // CUDA libraries copied from NVIDIA's runtime image, by file-name pattern.
    const cudaCopies = runtime.lines.filter((l) => l.instr === "COPY" && /--from=cuda-runtime/.test(l.args))
      .flatMap((l) => l.args.split(/\s+/).slice(1, -1)).map((p) => path.basename(p));
    const copiedSoname = (soname) => cudaCopies.some((g) => new RegExp(`^${g.replace(/\./g, "\\.").replace(/\*/g, ".*")}$`).test(soname));
    const builtWithCuda = /ORCA_CUDA:INTERNAL=ON|^ORCA_NCCL_LIBRARY:FILEPATH=\//m.test(fs.readFileSync(path.join(BUILD, "CMakeCache.txt"), "utf8"));
    const isCuda = (soname, where) => /^\/usr\/local\/cuda|\/libcuda\.so/.test(where) || /^lib(cudart|cublas|cublasLt|nccl)\.so/.test(soname);
    for (const b of BINARIES) requireFile(path.join(BUILD, "bin", b), `${b} of this build`);
    const owners = debianOwners([...new Set(BINARIES.flatMap((b) => [...neededLibraries(path.join(BUILD, "bin", b))]
      .filter(([soname, where]) => !isCuda(soname, where)).map(([, where]) => where)))]);
    for (const b of BINARIES) {
      for (const [soname, where] of neededLibraries(path.join(BUILD, "bin", b))) {
        if (isCuda(soname, where)) {
          if (!cuda) continue;  // the CPU image is built without CUDA
          assert.ok(copiedSoname(soname), `${flavour}: ${b} needs ${soname} (${where}): copy it from the CUDA runtime image`);
          continue;
        }
        const pkg = owners.get(where);
        assert.ok(pkg, `${b} needs ${where}, which no Debian package owns`);
        assert.ok(packages.has(pkg), `${flavour}: ${b} needs ${soname} from ${pkg}, which the runtime stage does not install`);
      }
    }
    if (cuda && builtWithCuda) {
      const worker = neededLibraries(path.join(BUILD, "bin/orca-worker"));
      for (const lib of ["libcudart.so.13", "libnccl.so.2"]) assert.ok(worker.has(lib), `this CUDA build's orca-worker loads ${lib}`);
      // cuBLAS is dlopen'ed by the first CudaBackend (kernels/cuda/cublas_library.h), not linked: linked, its
      // libcublasLt cost every process ~145 MiB at start. The image must still carry both for that dlopen.
      assert.ok(!worker.has("libcublas.so.13"), "orca-worker links libcublas again (it should dlopen it)");
      for (const lib of ["libcublas.so.13", "libcublasLt.so.13"]) {
        assert.ok(copiedSoname(lib), `${flavour}: the runtime image must carry ${lib}, which the CUDA backend dlopens`);
      }
    }
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
    // The worker's data plane is on its fixed, documented port.
    assert.deepEqual(JSON.parse(stage("worker").lines.find((l) => l.instr === "ENTRYPOINT").args).slice(-2), ["--data-plane-port", "7200"]);
    assert.equal(stages.at(-1).name, "orca", "the default target carries every binary");
  });

  test(`${flavour}: the build context leaves out build trees and tools`, () => {
    const ignore = fs.readFileSync(`${file}.dockerignore`, "utf8");
    for (const p of ["**/build", "**/build-*", "node_modules", ".tools", ".git"]) assert.ok(ignore.split("\n").includes(p), p);
  });

  test(`${flavour}: the Docker language server's validator (dockerfile-utils) finds nothing`, () => {
    const problems = validateDockerfile(fs.readFileSync(file, "utf8"), {});
    assert.deepEqual(problems.map((p) => `line ${p.range.start.line + 1}: ${p.message}`), []);
  });

  test(`${flavour}: dockerfilelint finds nothing (beyond what it does not know of Docker)`, () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, "node_modules/dockerfilelint/bin/dockerfilelint"), "-j", file],
                        { encoding: "utf8" });
    const issues = JSON.parse(r.stdout).files[0].issues;
    const stageNames = new Set(stages.map((s) => s.name));
    const real = issues.filter((i) => {
      // dockerfilelint 1.8 predates multi-stage builds (FROM <stage>) and HEALTHCHECK --start-period.
      if (i.title === "Base Image Missing Tag" && stageNames.has(/^FROM (\S+)/.exec(i.content)?.[1])) return false;
      if (i.title === "Invalid Argument Format" && /^HEALTHCHECK .*--start-period=\d+s/.test(i.content)) return false;
      return true;
    });
    assert.deepEqual(real.map((i) => `line ${i.line}: ${i.title}: ${i.content}`), []);
  });

  test(`${flavour}: hadolint's rules: pinned bases, apt hygiene, pipefail, non-root, no secrets, no GPU grab`, () => {
    const text = fs.readFileSync(file, "utf8");
    assert.match(text, /^# syntax=docker\/dockerfile:1$/m);
    const stageNames = new Set();
    for (const s of stages) {
      const from = resolveFrom(s.from, args);
      if (!stageNames.has(from)) {
        // DL3006/DL3007: an explicit tag, never latest; here also a point release (reproducible builds).
        const m = /^([a-z0-9./-]+):([A-Za-z0-9._-]+)$/.exec(from);
        assert.ok(m, `${s.name}: base image ${from} has no tag`);
        assert.notEqual(m[2], "latest", `${s.name}: ${from}`);
        assert.match(m[2], /^\d+\.\d+(\.\d+)?(-|$)/, `${s.name}: ${from} is not pinned to a point release`);
      }
      if (s.name) stageNames.add(s.name);
      const r = runs(s);
      if (r.length) assert.ok(s.lines.some((l) => l.instr === "SHELL" && /pipefail/.test(l.args)), `${s.name}: SHELL with pipefail (DL4006)`);
      for (const cmd of r) {
        assert.doesNotMatch(cmd, /(^|[\s;&])(sudo|apt)\s/, `${s.name}: no sudo or apt (DL3004, DL3027): ${cmd}`);
        if (/apt-get install/.test(cmd)) {
          assert.match(cmd, /apt-get install -y --no-install-recommends/, `${s.name}: DL3014/DL3015: ${cmd}`);
          assert.match(cmd, /apt-get update/, `${s.name}: update and install in one RUN (DL3009)`);
        }
        if (/apt-get (update|install)|bootstrap\.sh --image-deps/.test(cmd))
          assert.match(cmd, /rm -rf \/var\/lib\/apt\/lists\/\*/, `${s.name}: apt lists removed in the same RUN (DL3009): ${cmd}`);
      }
      for (const l of s.lines) {
        assert.notEqual(l.instr, "ADD", `${s.name}: COPY, not ADD (DL3020)`);
        assert.notEqual(l.instr, "MAINTAINER", `${s.name}: MAINTAINER is deprecated (DL4000)`);
        if (l.instr === "WORKDIR") assert.match(l.args, /^\//, `${s.name}: absolute WORKDIR (DL3000)`);
        if (l.instr === "COPY" && /--from=/.test(l.args)) {
          assert.ok(stageNames.has(/--from=(\S+)/.exec(l.args)[1]), `${s.name}: COPY --from an earlier stage: ${l.args}`);
        }
        if (l.instr === "ENV" || l.instr === "ARG") {
          for (const [, key] of l.args.matchAll(/(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=/g))
            assert.doesNotMatch(key, /PASSWORD|SECRET|TOKEN|API_?KEY|CREDENTIAL/i, `${s.name}: no secrets in ${l.instr} ${key}`);
        }
      }
    }
    // The device plugin decides which GPUs a pod gets; an image must not claim them all.
    for (const s of stages)
      for (const l of s.lines) assert.doesNotMatch(`${l.instr} ${l.args}`, /NVIDIA_VISIBLE_DEVICES/, `${s.name}: NVIDIA_VISIBLE_DEVICES baked into the image`);
    for (const target of Object.keys(SERVICES)) {
      let s = stage(target), user;
      while (s && !(user = s.lines.findLast((l) => l.instr === "USER"))) s = stage(s.from);
      assert.ok(user && !/^(root|0)(:|$)/.test(user.args), `${target} runs as non-root (DL3002)`);
    }
  });
}

// ---- Dockerfile.cuda's CMake configure against this machine's CUDA 13 ------------------------------

/** Runs bash `script` (in a private mount namespace when `privateMounts`); resolves {status, out}. */
function bash(script, { env = {}, privateMounts = false } = {}) {
  const argv = privateMounts ? ["unshare", "--mount", "--propagation", "private", "bash", "-c", script] : ["bash", "-c", script];
  return new Promise((resolve) => {
    const p = spawn(argv[0], argv.slice(1), { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (status) => resolve({ status, out }));
  });
}

const cudaFile = path.join(ROOT, "deploy/docker/Dockerfile.cuda");
const cudaBuild = parseDockerfile(cudaFile).stages.find((s) => s.name === "build");
const cudaRun = imageBuildRun(cudaBuild);
const nvcc = /-DCMAKE_CUDA_COMPILER=(\S+)/.exec(cudaRun.env.ORCA_CMAKE_ARGS)?.[1];
const toolkit = nvcc && fs.existsSync(nvcc) ? fs.realpathSync(path.dirname(path.dirname(nvcc))) : null;

// Directories holding NCCL's files (headers, libraries) in the toolkit or the system, and those files.
function ncclLocations() {
  const dirs = new Map();
  const candidates = [path.join(toolkit, "include"), path.join(toolkit, "lib"), path.join(toolkit, "lib64"),
                      "/usr/include", "/usr/lib/x86_64-linux-gnu", "/usr/lib"];
  for (const t of fs.existsSync(path.join(toolkit, "targets")) ? fs.readdirSync(path.join(toolkit, "targets")) : [])
    candidates.push(path.join(toolkit, "targets", t, "include"), path.join(toolkit, "targets", t, "lib"));
  for (const c of candidates) {
    if (!fs.existsSync(c)) continue;
    const real = fs.realpathSync(c);
    const files = fs.readdirSync(real).filter((f) => /^(lib)?nccl/.test(f));
    if (files.length) dirs.set(real, files);
  }
  return dirs;
}

// A bash prelude that hides NCCL in this mount namespace: each directory holding it is replaced by a view of
// itself without the nccl* entries (symlinks into a second mount of the original).
function hideNcclScript(work, locations) {
  const lines = ["set -e"];
  [...locations.keys()].forEach((dir, i) => {
    const orig = path.join(work, `orig-${i}`), view = path.join(work, `view-${i}`);
    lines.push(`mkdir -p ${orig} ${view}`, `mount --bind ${dir} ${orig}`,
               `for e in ${orig}/* ${orig}/.[!.]*; do [ -e "$e" ] || continue; case "\${e##*/}" in nccl*|libnccl*) ;; *) ln -sfn "$e" ${view}/ ;; esac; done`,
               `mount --bind ${view} ${dir}`);
  });
  lines.push(...[...locations].map(([dir, files]) => `! ls ${dir}/${files[0]} >/dev/null 2>&1 || { echo 'NCCL still visible in ${dir}'; exit 99; }`));
  return lines.join("\n");
}

test("Dockerfile.cuda: its CMake configure with CUDA 13, NCCL present (as laid out in the image) and absent",
     { timeout: 900_000, skip: toolkit ? false : `no CUDA toolkit at ${nvcc} (Dockerfile.cuda's CMAKE_CUDA_COMPILER)` },
     async (t) => {
  const locations = ncclLocations();
  if (!locations.size) return t.skip(`no NCCL in ${toolkit} or /usr to configure with`);
  const canHide = (await bash("mount --make-rprivate / && true", { privateMounts: true })).status === 0;
  if (!canHide) return t.skip("cannot make a private mount namespace (needs root and unshare) to hide NCCL");
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "orca-cuda-configure-"));
  t.after(() => fs.rmSync(work, { recursive: true, force: true }));
  const build = path.join(work, "build");
  // NCCL as the image has it: headers and libraries copied to NCCL_ROOT, none in the toolkit.
  const ncclRoot = path.join(work, "nccl");
  fs.mkdirSync(path.join(ncclRoot, "include"), { recursive: true });
  fs.mkdirSync(path.join(ncclRoot, "lib"), { recursive: true });
  for (const [dir, files] of locations) {
    for (const f of files) {
      const sub = /^lib/.test(f) ? "lib" : "include";
      fs.symlinkSync(path.join(work, `orig-${[...locations.keys()].indexOf(dir)}`, f), path.join(ncclRoot, sub, f));
    }
  }
  const hide = hideNcclScript(work, locations);
  const configure = async (what, { hidden, cmakeArgs = "", env = {} }) => {
    const started = Date.now();
    const script = `${hidden ? hide + "\n" : ""}exec bash ${path.join(ROOT, "scripts/bootstrap.sh")} --image-build`;
    const r = await bash(script, {
      privateMounts: hidden,
      env: { ORCA_BUILD_DIR: build, ORCA_CONFIGURE_ONLY: "1", NCCL_ROOT: "", CCACHE_BASEDIR: ROOT, ...env,
             ORCA_CMAKE_ARGS: `${cudaRun.env.ORCA_CMAKE_ARGS} -UORCA_NCCL_INCLUDE_DIR -UORCA_NCCL_LIBRARY ${cmakeArgs}` },
    });
    t.diagnostic(`${what}: configure ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const log = fs.existsSync(path.join(build, "configure.log")) ? fs.readFileSync(path.join(build, "configure.log"), "utf8") : "";
    return { ...r, what, log, nccl: /-- Orca NCCL \(GPU tensor parallelism\): (ON|OFF)(?: \((\S+)\))?/.exec(log) };
  };
  const ninjaCommand = (target) => {
    const r = spawnSync("ninja", ["-C", build, "-t", "commands", target], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim().split("\n").at(-1);
  };

  // 1. The image: Dockerfile.cuda's arguments and NCCL_ROOT, NCCL only there.
  let c = await configure("image layout", { hidden: true, env: { NCCL_ROOT: cudaRun.env.NCCL_ROOT ? ncclRoot : "" } });
  assert.equal(c.status, 0, `${c.what}: configure failed:\n${c.out}`);
  assert.match(c.log, /-- Orca CUDA backend: ON/);
  assert.equal(c.nccl?.[1], "ON", `${c.what}: NCCL found`);
  assert.ok(c.nccl[2].startsWith(ncclRoot), `${c.what}: NCCL from NCCL_ROOT, got ${c.nccl[2]}`);
  assert.match(ninjaCommand("bin/orca-worker"), /liborca_nccl\.a.*libnccl\.so/, "orca-worker links the NCCL communicator and NCCL");
  assert.match(ninjaCommand("core/engine/CMakeFiles/orca_engine.dir/engine.cc.o"), /-DORCA_WITH_NCCL\b/);

  // 2. Dockerfile.cuda's arguments (ORCA_ENABLE_NCCL=ON) on a toolkit without NCCL: a configure error that says so.
  c = await configure("NCCL required but absent", { hidden: true });
  assert.notEqual(c.status, 0, `${c.what}: configure must fail`);
  assert.match(c.out, /ORCA_ENABLE_NCCL=ON but nccl\.h \/ libnccl\.so were not found/);

  // 3. NCCL absent, AUTO: the CUDA build configures and builds the engine without it.
  c = await configure("NCCL absent", { hidden: true, cmakeArgs: "-DORCA_ENABLE_NCCL=AUTO" });
  assert.equal(c.status, 0, `${c.what}: configure failed:\n${c.out}`);
  assert.equal(c.nccl?.[1], "OFF", `${c.what}: NCCL off`);
  const link = ninjaCommand("bin/orca-worker");
  assert.doesNotMatch(link, /nccl/i, `${c.what}: orca-worker links nothing of NCCL`);
  assert.match(link, /libcudart\.so|-lcudart/, `${c.what}: still the CUDA build`);
  const engineCompile = ninjaCommand("core/engine/CMakeFiles/orca_engine.dir/engine.cc.o");
  assert.doesNotMatch(engineCompile, /ORCA_WITH_NCCL/);
  // The engine compiles without NCCL (its GPU tensor-parallel refusal is in that branch).
  const obj = await bash(`ninja -C ${build} core/engine/CMakeFiles/orca_engine.dir/engine.cc.o`, { env: { CCACHE_BASEDIR: ROOT } });
  assert.equal(obj.status, 0, `${c.what}: engine.cc does not compile without NCCL:\n${obj.out}`);

  // 4. NCCL present but switched off with the CMake option.
  c = await configure("ORCA_ENABLE_NCCL=OFF", { hidden: false, cmakeArgs: "-DORCA_ENABLE_NCCL=OFF" });
  assert.equal(c.status, 0, `${c.what}: configure failed:\n${c.out}`);
  assert.equal(c.nccl?.[1], "OFF");
  assert.doesNotMatch(ninjaCommand("bin/orca-worker"), /nccl/i);

  // 5. This machine's layout (NCCL inside the toolkit) is what this build tree found with AUTO: no configure needed.
  const cache = fs.readFileSync(path.join(BUILD, "CMakeCache.txt"), "utf8");
  const found = /^ORCA_NCCL_LIBRARY:FILEPATH=(\/\S+)$/m.exec(cache)?.[1];
  if (found && /^ORCA_ENABLE_NCCL:STRING=AUTO$/m.test(cache)) {
    assert.ok([...locations.keys()].some((d) => fs.realpathSync(found).startsWith(d)), `this build found NCCL at ${found}`);
  }
});
