#!/usr/bin/env python3
"""Orca's next-token distributions against llama.cpp's on the same GGUF file.

For each file: llama-server (a llama.cpp build you made yourself, outside the repository)
decodes greedily from random token-id prompts and reports the log-probabilities of its top
tokens at every step; `orca serve` then scores the same sequences, teacher-forced (OpenAI
completions with echo and logprobs), so every position compares the two engines'
distributions given the same prefix (Orca's prefill path). Orca also decodes greedily from
each prompt with its logprobs (its decode path), compared with llama.cpp's steps up to the
first token where the two continuations part. Both servers run one at a time, on loopback.

Printed per file (and written to OUT/summary.tsv): how often Orca's most likely token is
llama.cpp's greedy choice, and |Δ logprob| of that token (mean, 99th percentile, max). A wrong
block decoder, scale or layout shows up as disagreement far beyond what two implementations'
different rounding gives (llama.cpp quantizes activations per 256 values for K-quant weights,
Orca per 32); a BF16 file of the same model calibrates that rounding.

Which engine is nearer the exact function of the quantized weights? Give a file as
QUANT.gguf=TRUTH.gguf, TRUTH being QUANT dequantized to F32 (`orca model quantize QUANT.gguf
TRUTH.gguf --type f32`): Orca scores the same sequences on TRUTH too (f32 weights and
activations, no activation quantization), and both engines' |Δ logprob| and top-1 agreement
against it are reported.

  scripts/bench/logprobs_vs_llama_server.py --llama-server /path/to/llama-server \\
      --out OUT_DIR MODEL.gguf [MODEL.gguf ...]
"""

import argparse
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        sys.exit(f"POST {url}: HTTP {e.code}: {e.read().decode(errors='replace')[:2000]}")


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def wait_ready(url, proc, log, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode} before it was ready; see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.5)
    sys.exit(f"{url} not ready after {seconds} s; see {log}")


class Server:
    def __init__(self, cmd, ready_path, port, log, env=None, ready_seconds=600):
        self.log = log
        self.out = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.base = f"http://127.0.0.1:{port}"
        wait_ready(self.base + ready_path, self.proc, log, ready_seconds)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.out.close()


def vocab_size(orca, model):
    info = subprocess.run([orca, "model", "info", model], check=True, capture_output=True, text=True).stdout
    m = re.search(r"vocab (\d+)", info)
    if not m:
        sys.exit(f"cannot read the vocabulary size of {model} from `orca model info`:\n{info}")
    return int(m.group(1))


def llama_runs(args, model, prompts, log):
    port = free_port()
    env = dict(os.environ)
    bindir = os.path.dirname(os.path.abspath(args.llama_server))
    env["LD_LIBRARY_PATH"] = bindir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    cmd = [args.llama_server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", str(args.threads),
           "-c", str(2 * (args.prompt_len + args.gen) + 64), "-np", "1"]
    srv = Server(cmd, "/health", port, log, env=env)
    runs = []
    try:
        for ids in prompts:
            # Greedy (top_k 1), the raw distribution reported (post_sampling_probs false).
            r = post(srv.base + "/completion", {
                "prompt": ids, "n_predict": args.gen, "temperature": 0, "top_k": 1, "n_probs": args.top,
                "cache_prompt": False, "ignore_eos": True, "post_sampling_probs": False})
            steps = r["completion_probabilities"]
            if r.get("tokens_evaluated") != len(ids):
                sys.exit(f"llama-server evaluated {r.get('tokens_evaluated')} prompt tokens, sent {len(ids)}")
            runs.append([{"id": s["id"], "token": s["token"], "logprob": s["logprob"],
                          "top": {t["token"]: t["logprob"] for t in s["top_logprobs"]}} for s in steps])
    finally:
        srv.stop()
    return runs


def orca_scores(args, model, prompts, llama, log, decode=False):
    """Orca's distributions along llama.cpp's sequences (teacher-forced, the prefill path); with
    decode, also Orca's own greedy continuations with their logprobs (the decode path)."""
    port = free_port()
    cmd = [args.orca, "serve", "--model", model, "--port", str(port), "--threads", str(args.threads)] + args.orca_arg
    srv = Server(cmd, "/ready", port, log)
    scored = []
    try:
        served = get(srv.base + "/v1/models")["data"][0]["id"]
        for ids, run in zip(prompts, llama):
            seq = ids + [s["id"] for s in run]
            r = post(srv.base + "/v1/completions", {
                "model": served, "prompt": seq, "echo": True, "logprobs": args.top, "max_tokens": 1, "temperature": 0})
            lp = r["choices"][0]["logprobs"]
            if len(lp["token_logprobs"]) < len(seq):
                sys.exit(f"orca returned {len(lp['token_logprobs'])} prompt logprobs for {len(seq)} tokens")
            # Position len(ids) + j of the echoed prompt is the distribution llama.cpp sampled step j from.
            scored.append([{"logprob": lp["token_logprobs"][len(ids) + j], "top": lp["top_logprobs"][len(ids) + j]}
                           for j in range(len(run))])
        decoded = []
        for ids, run in zip(prompts, llama) if decode else []:
            r = post(srv.base + "/v1/completions", {
                "model": served, "prompt": ids, "logprobs": args.top, "max_tokens": len(run), "temperature": 0,
                "ignore_eos": True})
            lp = r["choices"][0]["logprobs"]
            decoded.append([{"token": t, "logprob": l} for t, l in zip(lp["tokens"], lp["token_logprobs"])])
    finally:
        srv.stop()
    return (scored, decoded) if decode else scored


def compare_decode(llama, decoded):
    """Orca's greedy decode against llama.cpp's: steps before the first different token, and
    |Δ logprob| of the shared tokens."""
    deltas, same_runs = [], 0
    for run, dec in zip(llama, decoded):
        j = 0
        while j < min(len(run), len(dec)) and run[j]["token"] == dec[j]["token"]:
            deltas.append(abs(run[j]["logprob"] - dec[j]["logprob"]))
            j += 1
        same_runs += j == len(run)
    return {"shared_steps": len(deltas), "runs_identical": same_runs,
            "dlogprob_mean": statistics.fmean(deltas) if deltas else float("nan"),
            "dlogprob_p99": p99(deltas) if deltas else float("nan")}


def p99(values):
    """The 99th percentile by nearest rank."""
    v = sorted(values)
    return v[max(0, -(-99 * len(v) // 100) - 1)]


def against_truth(run_sets, truth):
    """|Δ logprob| of llama.cpp's token and top-1 agreement of each engine against the truth."""
    out = {}
    for name, runs in run_sets.items():
        deltas, agree = [], 0
        for run, tr in zip(runs, truth):
            for x, t in zip(run, tr):
                deltas.append(abs(x["logprob"] - t["logprob"]))
                agree += max(x["top"].items(), key=lambda kv: kv[1])[0] == max(t["top"].items(), key=lambda kv: kv[1])[0]
        out[name] = (statistics.fmean(deltas), p99(deltas), agree / len(deltas))
    return out


def compare(llama, orca):
    agree = total = overlap = 0
    deltas = []
    for run, sc in zip(llama, orca):
        for l, o in zip(run, sc):
            total += 1
            best = max(o["top"].items(), key=lambda kv: kv[1])[0]
            agree += best == l["token"]
            overlap += len(set(o["top"]) & set(l["top"]))
            deltas.append(abs(o["logprob"] - l["logprob"]))
    top = max(len(run[0]["top"]) for run in llama)
    return {"positions": total, "top1_agree": agree / total, "topk_overlap": overlap / (total * top),
            "dlogprob_mean": statistics.fmean(deltas), "dlogprob_p99": p99(deltas), "dlogprob_max": max(deltas)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="GGUF files, each optionally =TRUTH.gguf (the file dequantized to F32)")
    p.add_argument("--llama-server", required=True, help="llama-server binary of your llama.cpp build")
    p.add_argument("--orca", default=os.path.join(REPO, "build", "bin", "orca"))
    p.add_argument("--orca-arg", action="append", default=[],
                   help="extra flag for `orca serve` on the file itself and its reference (repeatable), e.g. "
                        "--orca-arg=--tensor-parallel=2")
    p.add_argument("--out", required=True, help="directory for logs and summary.tsv")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--gen", type=int, default=32)
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    for f in [args.llama_server, args.orca] + [f for m in args.models for f in m.split("=")]:
        if not os.path.exists(f):
            sys.exit(f"no such file: {f}")
    if not (1 <= args.top <= 20 and args.prompts >= 1 and args.prompt_len >= 1 and args.gen >= 1):
        sys.exit("--top must be in [1, 20]; --prompts, --prompt-len and --gen at least 1")
    os.makedirs(args.out, exist_ok=True)
    summary = os.path.join(args.out, "summary.tsv")
    with open(summary, "w") as s:
        s.write("file\tpositions\ttop1_agree\ttopk_overlap\tdlogprob_mean\tdlogprob_p99\tdlogprob_max\n")
    with open(os.path.join(args.out, "decode.tsv"), "w") as s:
        s.write("file\tshared_steps\truns_identical\truns\tdlogprob_mean\tdlogprob_p99\n")
    with open(os.path.join(args.out, "truth.tsv"), "w") as s:
        s.write("file\tengine\tdlogprob_mean\tdlogprob_p99\ttop1_agree\n")
    for spec in args.models:
        model, _, truth_file = spec.partition("=")
        name = os.path.basename(model)
        rng = random.Random(f"{args.seed}:{name}")
        # Ordinary tokens only: specials and byte tokens sit at the ends of the vocabularies
        # these files use (Llama 2/3, SmolLM), so ids are drawn from [100, min(vocab, 32000) - 100).
        hi = min(vocab_size(args.orca, model), 32000) - 100
        prompts = [[rng.randrange(100, hi) for _ in range(args.prompt_len)] for _ in range(args.prompts)]
        t0 = time.time()
        llama = llama_runs(args, model, prompts, os.path.join(args.out, f"{name}.llama-server.log"))
        orca, decoded = orca_scores(args, model, prompts, llama, os.path.join(args.out, f"{name}.orca.log"), decode=True)
        truth = None
        if truth_file:
            truth = orca_scores(args, truth_file, prompts, llama, os.path.join(args.out, f"{name}.truth.log"))
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump({"prompts": prompts, "llama": llama, "orca": orca, "orca_decode": decoded, "truth": truth}, f)
        c = compare(llama, orca)
        row = [name, c["positions"], f"{c['top1_agree']:.4f}", f"{c['topk_overlap']:.4f}", f"{c['dlogprob_mean']:.4f}",
               f"{c['dlogprob_p99']:.4f}", f"{c['dlogprob_max']:.4f}"]
        with open(summary, "a") as s:
            s.write("\t".join(map(str, row)) + "\n")
        print(f"{name}: {c['positions']} positions, top-1 agreement {c['top1_agree']:.1%}, top-{args.top} overlap "
              f"{c['topk_overlap']:.1%}, |dlogprob| mean {c['dlogprob_mean']:.4f} p99 {c['dlogprob_p99']:.4f} "
              f"max {c['dlogprob_max']:.4f} ({time.time() - t0:.0f} s)", flush=True)
        dc = compare_decode(llama, decoded)
        with open(os.path.join(args.out, "decode.tsv"), "a") as f:
            f.write(f"{name}\t{dc['shared_steps']}\t{dc['runs_identical']}\t{len(prompts)}\t{dc['dlogprob_mean']:.4f}\t"
                    f"{dc['dlogprob_p99']:.4f}\n")
        print(f"  decode path: greedy continuations identical in {dc['runs_identical']} of {len(prompts)} prompts, "
              f"{dc['shared_steps']} shared steps, |dlogprob| mean {dc['dlogprob_mean']:.4f} p99 {dc['dlogprob_p99']:.4f}",
              flush=True)
        if truth is not None:
            t = against_truth({"llama.cpp": llama, "orca": orca}, truth)
            with open(os.path.join(args.out, "truth.tsv"), "a") as f:
                for engine, (mean, p99, agree) in t.items():
                    f.write(f"{name}\t{engine}\t{mean:.4f}\t{p99:.4f}\t{agree:.4f}\n")
            print("  against " + os.path.basename(truth_file) + " (scored by Orca): " + "; ".join(
                f"{engine} |dlogprob| mean {mean:.4f} p99 {p99:.4f}, top-1 agreement {agree:.1%}"
                for engine, (mean, p99, agree) in t.items()), flush=True)


if __name__ == "__main__":
    main()
