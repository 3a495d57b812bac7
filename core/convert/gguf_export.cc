#include "core/convert/gguf_export.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/dtype.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/engine/checkpoint.h"
#include "core/engine/models/model_family.h"
#include "core/formats/gguf_file.h"
#include "core/formats/gguf_writer.h"
#include "core/text/components.h"

namespace orca::convert {
namespace {

using json = nlohmann::json;
using engine::Checkpoint;
using engine::ModelArch;
using engine::ModelConfig;
using engine::RopeScaling;
using engine::SyntheticModelOptions;
using engine::SyntheticTensor;
using engine::TensorRole;

struct PlannedTensor {
  std::string name;                                       // GGUF name
  std::vector<int64_t> shape;                             // outermost first
  DType source = DType::kF32;                             // type in the source
  std::function<absl::Status(std::vector<float>*)> read;  // f32 values in GGUF layout
};

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Encodes every tensor with the mix's types and writes the file.
absl::Status WriteTensors(formats::GgufWriter& w, const std::vector<PlannedTensor>& plan, int32_t num_layers,
                          const ExportOptions& options, const std::string& dst, ExportReport* report) {
  bool has_output = false;
  for (const PlannedTensor& t : plan) has_output |= t.name == "output.weight";
  std::vector<DType> types;
  for (const PlannedTensor& t : plan) {
    const TypeChoice choice = ChooseType(options.mix, {t.name, t.shape, t.source, num_layers, has_output});
    ORCA_RETURN_IF_ERROR(w.AddTensor(t.name, t.shape, choice.dtype));
    types.push_back(choice.dtype);
    report->tensors.push_back({t.name, t.shape, t.source, choice.dtype, choice.note});
  }
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_num_procs();
  std::vector<float> values;
  auto encode = [&](size_t i, std::string* bytes) -> absl::Status {
    const PlannedTensor& t = plan[i];
    ORCA_RETURN_IF_ERROR(t.read(&values));
    const int64_t n = Elements(t.shape), cols = t.shape.back(), rows = n / cols;
    if (static_cast<int64_t>(values.size()) != n)
      return absl::InternalError(absl::StrCat("tensor '", t.name, "': read ", values.size(), " values, expected ", n));
    for (int64_t j = 0; j < n; ++j)
      if (!std::isfinite(values[j]))
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has a non-finite value (", values[j],
                                                       ") at row ", j / cols, ", column ", j % cols));
    const size_t row_bytes = DTypeRowBytes(types[i], cols);
    bytes->resize(row_bytes * rows);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16) if (rows > 16)
    for (int64_t r = 0; r < rows; ++r)
      QuantizeRow(types[i], values.data() + r * cols, bytes->data() + r * row_bytes, cols);
    report->bytes_written += bytes->size();
    return absl::OkStatus();
  };
  return w.Write(dst, encode);
}

// ---- Hugging Face layout (a checkpoint, or a synthetic model) -------------------------

struct HfModel {
  ModelConfig config;
  std::string hf_prefix;  // ModelFamily::hf_prefixes
  // Shape and type of a tensor by HF name; false when absent.
  std::function<bool(const std::string&, std::vector<int64_t>*, DType*)> describe;
  std::function<absl::Status(const std::string&, std::vector<float>*)> read;
};

std::string GgufArch(const ModelConfig& c) { return engine::FamilyOf(c.arch).gguf_architecture(c); }

// llama.cpp's converter permutes llama Q/K rows so that adjacent pairs rotate:
// within each head, row 2i + j comes from row j·D/2 + i.
void PermuteForAdjacentRope(std::vector<float>* v, int64_t heads, int64_t head_dim, int64_t cols) {
  const std::vector<float> in = *v;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < head_dim / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = h * head_dim + 2 * i + j, from = h * head_dim + j * (head_dim / 2) + i;
        std::copy(in.begin() + from * cols, in.begin() + (from + 1) * cols, v->begin() + to * cols);
      }
}

void Transpose(std::vector<float>* v, int64_t rows, int64_t cols) {
  const std::vector<float> in = *v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) (*v)[c * rows + r] = in[r * cols + c];
}

// The tensors of a model in llama.cpp's order: global ones by name, then each layer's by name.
absl::StatusOr<std::vector<PlannedTensor>> PlanHf(const HfModel& m) {
  const ModelConfig& c = m.config;
  const bool permute = engine::FamilyOf(c.arch).gguf_permutes_qk(c);
  std::vector<std::pair<TensorRole, int32_t>> roles;
  const TensorRole global[] = {TensorRole::kTokenEmbedding, TensorRole::kPositionEmbedding, TensorRole::kFinalNorm,
                               TensorRole::kFinalNormBias, TensorRole::kLmHead};
  const TensorRole per_layer[] = {TensorRole::kAttnNorm,
                                  TensorRole::kAttnNormBias,
                                  TensorRole::kQ,
                                  TensorRole::kK,
                                  TensorRole::kV,
                                  TensorRole::kQBias,
                                  TensorRole::kKBias,
                                  TensorRole::kVBias,
                                  TensorRole::kQkv,
                                  TensorRole::kQkvBias,
                                  TensorRole::kQNorm,
                                  TensorRole::kKNorm,
                                  TensorRole::kO,
                                  TensorRole::kOBias,
                                  TensorRole::kPostAttnNorm,
                                  TensorRole::kPostFfnNorm,
                                  TensorRole::kFfnNorm,
                                  TensorRole::kFfnNormBias,
                                  TensorRole::kGate,
                                  TensorRole::kUp,
                                  TensorRole::kUpBias,
                                  TensorRole::kDown,
                                  TensorRole::kDownBias};
  std::vector<PlannedTensor> plan;
  auto add = [&](TensorRole role, int32_t layer) -> absl::Status {
    const std::string hf = Checkpoint::HfTensorName(c.arch, m.hf_prefix, role, layer);
    const std::string name = Checkpoint::GgufTensorName(role, layer);
    std::vector<int64_t> shape;
    DType dtype;
    if (hf.empty() || name.empty() || !m.describe(hf, &shape, &dtype)) return absl::OkStatus();
    if (role == TensorRole::kLmHead && c.tie_word_embeddings) return absl::OkStatus();
    const bool conv1d = Checkpoint::IsHfConv1D(c.arch, role) && shape.size() == 2;
    if (conv1d) std::swap(shape[0], shape[1]);
    int64_t heads = 0;
    if (permute && (role == TensorRole::kQ || role == TensorRole::kQBias)) heads = c.num_heads;
    if (permute && (role == TensorRole::kK || role == TensorRole::kKBias)) heads = c.num_kv_heads;
    const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
    const int64_t head_dim = c.head_dim;
    // llama.cpp's files hold the norm weights as used: a (1 + w) norm's as 1 + w (Gemma).
    const bool norm = role == TensorRole::kAttnNorm || role == TensorRole::kFfnNorm || role == TensorRole::kFinalNorm ||
                      role == TensorRole::kQNorm || role == TensorRole::kKNorm || role == TensorRole::kPostAttnNorm ||
                      role == TensorRole::kPostFfnNorm;
    const float add = norm ? c.norm_weight_offset : 0.0f;
    PlannedTensor t{name, shape, dtype, nullptr};
    t.read = [&m, hf, conv1d, heads, rows, cols, head_dim, add](std::vector<float>* out) -> absl::Status {
      ORCA_RETURN_IF_ERROR(m.read(hf, out));
      if (add != 0.0f)
        for (float& v : *out) v += add;
      if (conv1d) Transpose(out, cols, rows);  // stored [in, out] = [cols, rows]
      if (heads > 0) PermuteForAdjacentRope(out, heads, head_dim, cols);
      return absl::OkStatus();
    };
    plan.push_back(std::move(t));
    return absl::OkStatus();
  };
  for (TensorRole r : global) ORCA_RETURN_IF_ERROR(add(r, 0));
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3) {
    // llama.cpp's converter writes Llama 3's RoPE scaling as per-frequency divisors in this tensor, not as metadata.
    std::vector<float> factors = engine::Llama3RopeFreqFactors(c);
    const int64_t n = static_cast<int64_t>(factors.size());
    plan.push_back({"rope_freqs.weight", {n}, DType::kF32, [factors = std::move(factors)](std::vector<float>* out) {
                      *out = factors;
                      return absl::OkStatus();
                    }});
  }
  if (c.rope_scaling.type == RopeScaling::Type::kLongRope) {
    // llama.cpp's converter writes Phi-3's LongRoPE divisors as these two tensors.
    for (const auto& [tensor, factors] :
         {std::pair<const char*, const std::vector<float>*>{"rope_factors_long.weight", &c.rope_scaling.long_factors},
          {"rope_factors_short.weight", &c.rope_scaling.short_factors}}) {
      const int64_t n = static_cast<int64_t>(factors->size());
      plan.push_back({tensor, {n}, DType::kF32, [values = *factors](std::vector<float>* out) {
                        *out = values;
                        return absl::OkStatus();
                      }});
    }
  }
  for (int32_t l = 0; l < c.num_layers; ++l)
    for (TensorRole r : per_layer) ORCA_RETURN_IF_ERROR(add(r, l));  // roles the family has no name for: skipped
  auto by_name = [](const PlannedTensor& a, const PlannedTensor& b) { return a.name < b.name; };
  const auto first_layer =
      std::find_if(plan.begin(), plan.end(), [](const PlannedTensor& t) { return t.name.rfind("blk.", 0) == 0; });
  std::sort(plan.begin(), first_layer, by_name);
  for (auto it = first_layer; it != plan.end();) {
    const std::string prefix = it->name.substr(0, it->name.find('.', 4) + 1);
    auto end = std::find_if(it, plan.end(), [&](const PlannedTensor& t) { return t.name.rfind(prefix, 0) != 0; });
    std::sort(it, end, by_name);
    it = end;
  }
  return plan;
}

void SetHyperParameters(const ModelConfig& c, formats::GgufWriter* w) {
  const std::string a = GgufArch(c);
  w->SetString("general.architecture", a);
  w->SetU32(a + ".context_length", static_cast<uint32_t>(c.max_position));
  w->SetU32(a + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w->SetU32(a + ".block_count", static_cast<uint32_t>(c.num_layers));
  w->SetU32(a + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w->SetU32(a + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  engine::FamilyOf(c.arch).write_gguf_keys(c, w);
}

// The pre-tokenizer llama.cpp should use for a tokenizer.json's pre_tokenizer.
std::string PreTokenizerName(const json& pre, std::vector<std::string>* notes) {
  if (pre.is_object() && pre.value("type", "") == "ByteLevel") return "gpt-2";
  // A Split whose regex is one llama.cpp knows by name (before the looser checks below: o200k's has \p{N}{1,3}).
  std::vector<json> splits = {pre};
  if (pre.is_object() && pre.contains("pretokenizers") && pre["pretokenizers"].is_array())
    splits.assign(pre["pretokenizers"].begin(), pre["pretokenizers"].end());
  for (const json& p : splits) {
    if (!p.is_object() || p.value("type", "") != "Split" || !p.contains("pattern")) continue;
    const std::string regex = p["pattern"].value("Regex", "");
    if (regex == text::kGpt4oPattern) return "gpt-4o";
    if (regex == text::kTekkenPattern) return "tekken";
  }
  const std::string text = pre.dump();
  if (text.find("\\\\p{N}{1,3}") != std::string::npos) return "llama-bpe";
  if (text.find("\\\\p{N}") != std::string::npos && text.find("Split") != std::string::npos) return "qwen2";
  notes->push_back("unrecognized pre_tokenizer; wrote tokenizer.ggml.pre \"gpt-2\"");
  return "gpt-2";
}

// A byte-level BPE tokenizer.json (GPT-2 family) as llama.cpp's tokenizer.ggml.* keys.
absl::Status SetTokenizer(const std::string& tokenizer_json, const std::string& config_json, const ModelConfig& c,
                          formats::GgufWriter* w, ExportReport* report) {
  if (tokenizer_json.empty()) {
    w->SetString("tokenizer.ggml.model", "none");
    report->notes.push_back("no tokenizer.json: wrote tokenizer.ggml.model \"none\" (token ids only)");
    return absl::OkStatus();
  }
  const json tok = json::parse(tokenizer_json, nullptr, false);
  if (tok.is_discarded() || !tok.contains("model") || !tok["model"].is_object())
    return absl::InvalidArgumentError("tokenizer.json: not a tokenizers JSON file");
  const json& model = tok["model"];
  if (model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: model type '", model.value("type", "?"),
                                                 "' cannot be exported (byte-level BPE can)"));
  std::vector<std::string> tokens(static_cast<size_t>(c.vocab_size));
  std::vector<int32_t> types(tokens.size(), 0);
  auto place = [&](int64_t id, const std::string& text, int32_t type) -> absl::Status {
    if (id < 0 || id >= c.vocab_size)
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: token '", text, "' has id ", id,
                                                     " outside the model's vocabulary of ", c.vocab_size));
    tokens[id] = text;
    types[id] = type;
    return absl::OkStatus();
  };
  for (const auto& [text, id] : model["vocab"].items()) ORCA_RETURN_IF_ERROR(place(id.get<int64_t>(), text, 1));
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& a : tok["added_tokens"])
      ORCA_RETURN_IF_ERROR(place(a.value("id", -1), a.value("content", ""), a.value("special", false) ? 3 : 4));
  int64_t padded = 0;
  for (size_t id = 0; id < tokens.size(); ++id)
    if (types[id] == 0) tokens[id] = absl::StrCat("[PAD", id, "]"), types[id] = 5, ++padded;
  if (padded > 0)
    report->notes.push_back(absl::StrCat(padded, " vocabulary ids without a token written as unused [PAD]"));
  std::vector<std::string> merges;
  if (model.contains("merges"))
    for (const json& m : model["merges"]) {
      if (m.is_string())
        merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2)
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    }
  w->SetString("tokenizer.ggml.model", "gpt2");
  w->SetString("tokenizer.ggml.pre", PreTokenizerName(tok.value("pre_tokenizer", json()), &report->notes));
  w->SetStringArray("tokenizer.ggml.tokens", tokens);
  w->SetI32Array("tokenizer.ggml.token_type", types);
  w->SetStringArray("tokenizer.ggml.merges", merges);
  if (c.bos_token_id >= 0) w->SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_token_id));
  if (!c.eos_token_ids.empty()) w->SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids[0]));
  const json cfg = config_json.empty() ? json::object() : json::parse(config_json, nullptr, false);
  if (cfg.is_object()) {
    w->SetBool("tokenizer.ggml.add_bos_token", cfg.value("add_bos_token", false));
    if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
      w->SetString("tokenizer.chat_template", cfg["chat_template"].get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<ExportReport> ExportHf(const HfModel& m, const std::string& tokenizer_json,
                                      const std::string& tokenizer_config_json, const std::string& name,
                                      const std::string& dst, const ExportOptions& options) {
  const ModelConfig& c = m.config;
  if (GgufArch(c) == "llama" && c.rotary_dim != c.head_dim)
    return absl::UnimplementedError("llama models with partial rotary dimensions cannot be exported to GGUF");
  ExportReport report;
  formats::GgufWriter w;
  SetHyperParameters(c, &w);
  w.SetString("general.name", name);
  w.SetU32("general.file_type", LlamaFileType(options.mix));
  w.SetU32("general.quantization_version", 2);
  ORCA_RETURN_IF_ERROR(SetTokenizer(tokenizer_json, tokenizer_config_json, c, &w, &report));
  ORCA_ASSIGN_OR_RETURN(std::vector<PlannedTensor> plan, PlanHf(m));
  ORCA_RETURN_IF_ERROR(WriteTensors(w, plan, c.num_layers, options, dst, &report));
  return report;
}

// Rows of a mapped tensor as f32 (any type Orca reads).
absl::Status ReadMapped(const formats::TensorInfo& t, std::vector<float>* out) {
  const int64_t cols = t.shape.back(), rows = t.NumElements() / cols;
  out->resize(static_cast<size_t>(t.NumElements()));
  const size_t row_bytes = DTypeRowBytes(t.dtype, cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(t.dtype, t.data + r * row_bytes, out->data() + r * cols, cols);
  return absl::OkStatus();
}

// ---- GGUF to GGUF ---------------------------------------------------------------------

absl::StatusOr<ExportReport> RequantizeGguf(const Checkpoint& ckpt, const std::string& dst,
                                            const ExportOptions& options) {
  const formats::GgufFile& g = *ckpt.gguf();
  ExportReport report;
  formats::GgufWriter w;
  for (const auto& [key, value] : g.metadata()) w.Copy(key, value);
  w.SetU32("general.file_type", LlamaFileType(options.mix));
  w.SetU32("general.quantization_version", 2);
  std::vector<PlannedTensor> plan;
  std::map<std::string, int> already_quantized;  // source type -> tensors
  for (const std::string& name : g.Names()) {
    const formats::TensorInfo* t = g.Find(name);
    if (!t->unsupported.empty()) return absl::UnimplementedError(t->unsupported);
    plan.push_back({name, t->shape, t->dtype, [t](std::vector<float>* out) { return ReadMapped(*t, out); }});
    if (IsQuantized(t->dtype)) ++already_quantized[DTypeName(t->dtype)];
  }
  // One note for all of them, not one line per tensor.
  if (!already_quantized.empty()) {
    std::vector<std::string> counts;
    int total = 0;
    for (const auto& [type, n] : already_quantized) {
      counts.push_back(absl::StrCat(n, " ", type));
      total += n;
    }
    const std::string what =
        absl::StrCat(total, " source tensors were already quantized (", absl::StrJoin(counts, ", "), ")");
    if (options.mix == QuantMix::kF32)
      report.notes.push_back(absl::StrCat(what, ": written as their exact f32 values (dequantized, no new rounding)"));
    else
      report.notes.push_back(
          absl::StrCat(what, ": they were dequantized and ",
                       options.mix == QuantMix::kF16 || options.mix == QuantMix::kBF16 ? "rounded" : "quantized",
                       " again, so both roundings add up; convert from an F32, F16 or BF16 source where there is one"));
  }
  ORCA_RETURN_IF_ERROR(WriteTensors(w, plan, ckpt.config().num_layers, options, dst, &report));
  return report;
}

}  // namespace

absl::StatusOr<ExportReport> QuantizeCheckpoint(const std::string& src, const std::string& dst,
                                                const ExportOptions& options) {
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(src));
  if (ckpt->format() == Checkpoint::Format::kGguf) return RequantizeGguf(*ckpt, dst, options);
  HfModel m;
  m.config = ckpt->config();
  m.hf_prefix = ckpt->hf_prefix();
  const Checkpoint* raw = ckpt.get();
  m.describe = [raw](const std::string& name, std::vector<int64_t>* shape, DType* dtype) {
    const formats::TensorInfo* t = raw->tensors().Find(name);
    if (t == nullptr || !t->unsupported.empty()) return false;
    *shape = t->shape;
    *dtype = t->dtype;
    return true;
  };
  m.read = [raw](const std::string& name, std::vector<float>* out) {
    return ReadMapped(*raw->tensors().Find(name), out);
  };
  const std::string tokenizer = ReadFileToString(src + "/tokenizer.json").value_or("");
  const std::string tokenizer_config = ReadFileToString(src + "/tokenizer_config.json").value_or("");
  std::string name = src;
  while (!name.empty() && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);
  return ExportHf(m, tokenizer, tokenizer_config, name, dst, options);
}

absl::StatusOr<ExportReport> WriteSyntheticGguf(const SyntheticModelOptions& model, const std::string& tokenizer_json,
                                                const std::string& tokenizer_config_json, const std::string& dst,
                                                const ExportOptions& options) {
  HfModel m;
  m.config = model.ToConfig();
  ORCA_RETURN_IF_ERROR(m.config.Validate());
  if (model.bos_token_id >= 0) m.config.bos_token_id = model.bos_token_id;
  if (model.eos_token_id >= 0) m.config.eos_token_ids = {model.eos_token_id};
  m.hf_prefix = engine::FamilyOf(m.config.arch).hf_prefixes.front();  // where synth writes them
  std::map<std::string, SyntheticTensor> tensors;
  for (const SyntheticTensor& t : SyntheticTensors(model)) tensors[t.name] = t;
  m.describe = [&tensors, &model](const std::string& name, std::vector<int64_t>* shape, DType* dtype) {
    auto it = tensors.find(name);
    if (it == tensors.end()) return false;
    *shape = it->second.shape;
    *dtype = model.dtype;
    return true;
  };
  m.read = [&tensors, &model](const std::string& name, std::vector<float>* out) {
    const SyntheticTensor& t = tensors.at(name);
    out->resize(static_cast<size_t>(t.NumElements()));
    SyntheticTensorValues(model, t, out->data());
    return absl::OkStatus();
  };
  return ExportHf(m, tokenizer_json, tokenizer_config_json, "orca-synthetic", dst, options);
}

}  // namespace orca::convert
