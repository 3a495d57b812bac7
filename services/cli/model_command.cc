// `orca model synth`, `orca model info` and `orca model quantize`.

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/mapped_file.h"
#include "core/convert/gguf_export.h"
#include "core/engine/checkpoint.h"
#include "core/engine/models/model_family.h"
#include "core/engine/synthetic_checkpoint.h"
#include "core/formats/tensor_source.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/tokenizer.h"
#include "services/cli/commands.h"

namespace orca::cli {
namespace {

struct Preset {
  const char* name;
  const char* arch;
  int hidden, layers, heads, kv_heads, ffn, vocab;
  bool tied = true;
  double rope_theta = 10000.0;
  double llama3_rope_factor = 0;  ///< Llama 3.x's RoPE scaling (low 1, high 4, original context 8192); 0: none
  int head_dim = 0;               ///< 0: hidden / heads
  int sliding_window = 0;         ///< local layers' window (0: the family's default)
  double linear_rope_factor = 0;  ///< linear RoPE scaling of the global layers (Gemma 3 4B+); 0: none
  double yarn_rope_factor = 0;    ///< YaRN (Ministral 3: 16 over an original context of 16384); 0: none
  int yarn_original_context = 0;
  double attn_temperature_scale = 0;  ///< Llama 4's attention temperature (Ministral 3: 0.1); 0: none
};
// "25m" and "135m" are the engine benchmark's Llama shapes (the latter is
// SmolLM-135M's); "default" is what `orca serve` synthesizes on first run: the
// 25m shape with the tokenizer's natural vocabulary (vocab 0 below), so every
// token it can sample decodes to real text. The rest are real models' shapes
// and RoPE (Llama 3.x's scaling: a GGUF gets rope_freqs.weight, as llama.cpp
// writes it), with random weights.
constexpr Preset kPresets[] = {
    {"tiny", "llama", 64, 2, 4, 2, 192, 512},
    {"default", "llama", 512, 8, 8, 4, 1408, 0},
    {"25m", "llama", 512, 8, 8, 4, 1408, 8192},
    {"135m", "llama", 576, 30, 9, 3, 1536, 49152},
    {"smollm-135m", "llama", 576, 30, 9, 3, 1536, 49152},
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, false},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, true, 500000.0, 32.0},
    {"llama-3.2-3b", "llama", 3072, 28, 24, 8, 8192, 128256, true, 500000.0, 32.0},
    {"llama-3.1-8b", "llama", 4096, 32, 32, 8, 14336, 128256, false, 500000.0, 8.0},
    {"gpt2-tiny", "gpt2", 64, 2, 4, 4, 256, 512},
    {"qwen3-tiny", "qwen3", 64, 2, 4, 2, 192, 512, true, 1000000.0, 0, 32},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 151936, true, 1000000.0, 0, 128},
    {"qwen3-4b", "qwen3", 2560, 36, 32, 8, 9728, 151936, true, 1000000.0, 0, 128},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 12288, 151936, false, 1000000.0, 0, 128},
    {"gemma2-2b", "gemma2", 2304, 26, 8, 4, 9216, 256000, true, 10000.0, 0, 256, 4096},
    {"gemma3-tiny", "gemma3", 64, 3, 4, 2, 192, 512, true, 1000000.0, 0, 32, 8},
    {"gemma3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, true, 1000000.0, 0, 256, 512},
    {"gemma3-4b", "gemma3", 2560, 34, 8, 4, 10240, 262208, true, 1000000.0, 0, 256, 1024, 8.0},
    {"ministral3-3b", "mistral3", 3072, 26, 32, 8, 9216, 131072, true, 1000000.0, 0, 128, 0, 0, 16.0, 16384, 0.1},
};

std::string PresetNames() {
  std::string out;
  for (const auto& p : kPresets) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void PrintReport(const convert::ExportReport& r, const std::string& out) {
  std::map<std::string, int> counts;
  // A type fallback is printed once per distinct note (a 32-layer file repeats each one per layer).
  struct Fallback {
    std::string first_tensor;
    int tensors = 0;
  };
  std::vector<std::pair<std::string, Fallback>> fallbacks;
  for (const auto& t : r.tensors) {
    ++counts[DTypeName(t.to)];
    if (t.note.empty()) continue;
    auto it = std::find_if(fallbacks.begin(), fallbacks.end(), [&](const auto& f) { return f.first == t.note; });
    if (it == fallbacks.end()) it = fallbacks.insert(fallbacks.end(), {t.note, {t.name, 0}});
    ++it->second.tensors;
  }
  for (const auto& [note, f] : fallbacks) {
    if (f.tensors == 1) {
      std::cout << "  " << f.first_tensor << ": " << note << "\n";
    } else {
      std::cout << "  " << f.tensors << " tensors (" << f.first_tensor << ", ...): " << note << "\n";
    }
  }
  for (const auto& n : r.notes) std::cout << "  note: " << n << "\n";
  std::cout << "wrote " << out << ": " << r.tensors.size() << " tensors (";
  bool first = true;
  for (const auto& [type, n] : counts) std::cout << (first ? "" : ", ") << n << " " << type, first = false;
  std::cout << "), " << r.bytes_written / 1048576.0 << " MiB of tensor data\n";
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "orca model: %s\n", std::string(s.message()).c_str());
  return 1;
}

absl::Status WriteTokenizer(const std::string& dir, int32_t vocab_size, int32_t* bos, int32_t* eos) {
  auto files = text::MakeSyntheticByteLevelTokenizer(vocab_size);
  if (!files.ok()) return files.status();
  if (absl::Status s = WriteStringToFile(dir + "/tokenizer.json", files->tokenizer_json); !s.ok()) return s;
  if (absl::Status s = WriteStringToFile(dir + "/tokenizer_config.json", files->tokenizer_config_json); !s.ok())
    return s;
  if (absl::Status s = WriteStringToFile(dir + "/generation_config.json", files->generation_config_json); !s.ok())
    return s;
  // The model's config.json names the same BOS/EOS as the tokenizer.
  auto tok = text::Tokenizer::FromJson(files->tokenizer_json, files->tokenizer_config_json);
  if (!tok.ok()) return tok.status();
  *bos = (*tok)->bos_id().value_or(-1);
  const std::vector<int32_t> eos_ids = (*tok)->eos_ids();
  *eos = eos_ids.empty() ? -1 : eos_ids.front();
  return absl::OkStatus();
}

int WriteSynthGguf(engine::SyntheticModelOptions o, const std::string& type, const std::string& out) {
  convert::ExportOptions eo;
  if (!convert::ParseQuantMix(type, &eo.mix))
    return Fail(absl::InvalidArgumentError("--type: '" + type + "' is not one of " + convert::QuantMixNames()));
  auto files = text::MakeSyntheticByteLevelTokenizer(o.vocab_size);
  if (!files.ok()) return Fail(files.status());
  auto tok = text::Tokenizer::FromJson(files->tokenizer_json, files->tokenizer_config_json);
  if (!tok.ok()) return Fail(tok.status());
  o.bos_token_id = (*tok)->bos_id().value_or(-1);
  const std::vector<int32_t> eos_ids = (*tok)->eos_ids();
  o.eos_token_id = eos_ids.empty() ? -1 : eos_ids.front();
  auto report = convert::WriteSyntheticGguf(o, files->tokenizer_json, files->tokenizer_config_json, out, eo);
  if (!report.ok()) return Fail(report.status());
  std::cout << o.ToConfig().Summary() << "\n";
  PrintReport(*report, out);
  return 0;
}

int RunQuantize(int argc, char** argv) {
  std::string type;
  int64_t threads = 0;
  FlagSet flags("orca model quantize",
                "Writes a GGUF file with the tensor types of a quantization mix, from a Hugging Face checkpoint\n"
                "directory or a GGUF file. Per-tensor types follow llama.cpp's rules for the mix (q4_k_m: Q6_K\n"
                "output and some attn_v/ffn_down, Q4_K elsewhere; see core/convert/quant_mix.h), so llama.cpp\n"
                "loads the result as that file type.\nUsage: orca model quantize SRC DST.gguf --type q4_k_m");
  flags.AddString("type", &type, "Mix: " + convert::QuantMixNames() + " (required)");
  flags.AddInt("threads", &threads, "Threads quantizing (0 = all cores)");
  if (absl::Status s = flags.Parse(argc, argv, 1, /*allow_positional=*/true); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (flags.positional().size() != 2) return Fail(absl::InvalidArgumentError("expected SRC and DST"));
  convert::ExportOptions eo;
  eo.num_threads = static_cast<int>(threads);
  if (type.empty() || !convert::ParseQuantMix(type, &eo.mix))
    return Fail(absl::InvalidArgumentError("--type: '" + type + "' is not one of " + convert::QuantMixNames()));
  const std::string& dst = flags.positional()[1];
  if (!EndsWith(dst, ".gguf")) return Fail(absl::InvalidArgumentError(dst + ": the output must be a .gguf file"));
  auto report = convert::QuantizeCheckpoint(flags.positional()[0], dst, eo);
  if (!report.ok()) return Fail(report.status());
  PrintReport(*report, dst);
  return 0;
}

int RunSynth(int argc, char** argv) {
  std::string preset, arch = "llama", out, dtype = "bf16", type;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_position = 2048,
          seed = 0, sliding_window = 0, sliding_window_pattern = 0;
  double rope_theta = 0, rope_theta_local = 0, rope_scaling_factor = 0, partial_rotary_factor = 1,
         attn_temperature_scale = 0;
  int64_t rope_original_context = 0;
  std::string rope_scaling;
  bool tie = true, attention_bias = false;
  FlagSet flags("orca model synth",
                "Writes a deterministic random-weight checkpoint (config.json, model.safetensors, tokenizer.json,\n"
                "tokenizer_config.json) for tests, benchmarks and the default model. Same flags, same bytes.\n"
                "With --type (or an --out ending in .gguf) it writes one GGUF file instead, any size, in any\n"
                "type or quantization mix, generated tensor by tensor.");
  flags.AddString("out", &out, "Output directory, or a .gguf file (required)");
  flags.AddString("preset", &preset, "Shape preset: " + PresetNames() + " (flags below override it)");
  flags.AddString("type", &type, "GGUF tensor types: " + convert::QuantMixNames() + " (implies GGUF output)");
  flags.AddString("arch", &arch, "Model family: " + engine::FamilyNames());
  flags.AddInt("hidden-size", &hidden, "Hidden size");
  flags.AddInt("num-layers", &layers, "Transformer layers");
  flags.AddInt("num-heads", &heads, "Attention heads");
  flags.AddInt("num-kv-heads", &kv_heads, "KV heads (rotary families; grouped-query attention)");
  flags.AddInt("head-dim", &head_dim, "Head dimension (0 = hidden size / heads)");
  flags.AddDouble("rope-theta", &rope_theta, "RoPE base (0 = the preset's, else 10000)");
  flags.AddDouble("rope-theta-local", &rope_theta_local, "Local layers' RoPE base (0 = the family's: Gemma 3 10000)");
  flags.AddString("rope-scaling", &rope_scaling,
                  "RoPE scaling: linear, yarn or longrope (phi3) (empty = the preset's, else none)");
  flags.AddDouble("partial-rotary-factor", &partial_rotary_factor, "Share of each head RoPE rotates (Phi-4-mini: 0.75)");
  flags.AddDouble("rope-scaling-factor", &rope_scaling_factor, "RoPE scaling factor (with --rope-scaling)");
  flags.AddInt("rope-original-context", &rope_original_context,
               "YaRN's original context (0 = --max-position / --rope-scaling-factor)");
  flags.AddDouble("attn-temperature-scale", &attn_temperature_scale,
                  "Llama 4's attention temperature of the queries (mistral3's llama_4_scaling_beta; Ministral 3: "
                  "0.1), stepping every YaRN original context (0 = none)");
  flags.AddInt("sliding-window", &sliding_window, "Local layers' attention window (0 = the preset's or family's)");
  flags.AddInt("sliding-window-pattern", &sliding_window_pattern,
               "Every how many layers one is global (0 = the family's: Gemma 2 2, Gemma 3 6)");
  flags.AddInt("intermediate-size", &ffn, "FFN size (0 = architecture default)");
  flags.AddInt("vocab-size", &vocab, "Vocabulary size (>= 260 for the byte-level tokenizer)");
  flags.AddInt("max-position", &max_position, "Context length");
  flags.AddInt("seed", &seed, "Weight seed");
  flags.AddString("dtype", &dtype, "Weight dtype: f32, bf16 or f16");
  flags.AddBool("tie-embeddings", &tie, "Tie the LM head to the token embedding");
  flags.AddBool("attention-bias", &attention_bias, "Q/K/V biases (Qwen2-style; llama only)");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out is required"));
  engine::SyntheticModelOptions o;
  if (!preset.empty()) {
    const Preset* p = nullptr;
    for (const auto& candidate : kPresets)
      if (preset == candidate.name) p = &candidate;
    if (p == nullptr) return Fail(absl::InvalidArgumentError("--preset: unknown preset '" + preset + "'"));
    if (!flags.IsSet("arch")) arch = p->arch;
    o.hidden_size = p->hidden;
    o.num_layers = p->layers;
    o.num_heads = p->heads;
    o.num_kv_heads = p->kv_heads;
    o.intermediate_size = p->ffn;
    o.vocab_size = p->vocab > 0 ? p->vocab : text::SyntheticNaturalVocabSize();
    if (!flags.IsSet("tie-embeddings")) tie = p->tied;
    o.rope_theta = p->rope_theta;
    o.head_dim = p->head_dim;
    o.sliding_window = p->sliding_window;
    if (p->linear_rope_factor > 0) {
      o.rope_scaling.type = engine::RopeScaling::Type::kLinear;
      o.rope_scaling.factor = p->linear_rope_factor;
    }
    if (p->llama3_rope_factor > 0) {
      o.rope_scaling.type = engine::RopeScaling::Type::kLlama3;
      o.rope_scaling.factor = p->llama3_rope_factor;
    }
    if (p->yarn_rope_factor > 0) {
      o.rope_scaling.type = engine::RopeScaling::Type::kYarn;
      o.rope_scaling.factor = p->yarn_rope_factor;
      o.rope_scaling.original_max_position = p->yarn_original_context;
    }
    o.attn_temperature_scale = static_cast<float>(p->attn_temperature_scale);
  }
  const engine::ModelFamily* family = engine::FindFamilyByName(arch);
  if (family == nullptr)
    return Fail(absl::InvalidArgumentError("--arch '" + arch + "' is not one of " + engine::FamilyNames()));
  o.arch = family->arch;
  if (hidden) o.hidden_size = static_cast<int32_t>(hidden);
  if (layers) o.num_layers = static_cast<int32_t>(layers);
  if (heads) o.num_heads = static_cast<int32_t>(heads);
  if (kv_heads) o.num_kv_heads = static_cast<int32_t>(kv_heads);
  if (head_dim) o.head_dim = static_cast<int32_t>(head_dim);
  if (rope_theta > 0) o.rope_theta = rope_theta;
  if (rope_theta_local > 0) o.rope_theta_local = rope_theta_local;
  if (sliding_window) o.sliding_window = static_cast<int32_t>(sliding_window);
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1))
    return Fail(absl::InvalidArgumentError("--partial-rotary-factor must be in (0, 1]"));
  o.partial_rotary_factor = partial_rotary_factor;
  if (rope_scaling == "longrope") {
    if (rope_original_context <= 0 || rope_original_context >= max_position)
      return Fail(absl::InvalidArgumentError("--rope-scaling longrope needs --rope-original-context below --max-position"));
    o.rope_scaling = engine::RopeScaling{};
    o.rope_scaling.type = engine::RopeScaling::Type::kLongRope;  // the family draws its factors
    o.rope_scaling.original_max_position = rope_original_context;
  } else if (!rope_scaling.empty()) {
    if (rope_scaling != "linear" && rope_scaling != "yarn")
      return Fail(absl::InvalidArgumentError("--rope-scaling must be linear, yarn or longrope"));
    if (!(rope_scaling_factor > 1))
      return Fail(absl::InvalidArgumentError("--rope-scaling needs a --rope-scaling-factor above 1"));
    o.rope_scaling = engine::RopeScaling{};
    o.rope_scaling.type = rope_scaling == "yarn" ? engine::RopeScaling::Type::kYarn : engine::RopeScaling::Type::kLinear;
    o.rope_scaling.factor = rope_scaling_factor;
    o.rope_scaling.original_max_position =
        rope_original_context > 0 ? rope_original_context
                                  : static_cast<int64_t>(max_position / rope_scaling_factor);
  }
  if (attn_temperature_scale != 0) {
    if (o.arch != engine::ModelArch::kMistral3 || !std::isfinite(attn_temperature_scale))
      return Fail(absl::InvalidArgumentError("--attn-temperature-scale needs --arch mistral3 and a finite value"));
    o.attn_temperature_scale = static_cast<float>(attn_temperature_scale);
  }
  if (sliding_window_pattern) o.sliding_window_pattern = static_cast<int32_t>(sliding_window_pattern);
  if (ffn) o.intermediate_size = static_cast<int32_t>(ffn);
  if (vocab) o.vocab_size = static_cast<int32_t>(vocab);
  if (!flags.IsSet("num-kv-heads") && preset.empty()) o.num_kv_heads = o.num_heads;
  o.max_position = static_cast<int32_t>(max_position);
  o.seed = static_cast<uint64_t>(seed);
  o.tie_word_embeddings = tie;
  o.attention_bias = attention_bias;
  if (!ParseDType(dtype, &o.dtype)) return Fail(absl::InvalidArgumentError("--dtype must be f32, bf16 or f16"));
  if (o.hidden_size <= 0 || o.num_layers <= 0 || o.num_heads <= 0 || o.vocab_size <= 0)
    return Fail(
        absl::InvalidArgumentError("give a --preset or --hidden-size, --num-layers, --num-heads and --vocab-size"));
  if (o.head_dim == 0 && o.hidden_size % o.num_heads != 0)
    return Fail(absl::InvalidArgumentError("--hidden-size must be divisible by --num-heads (or give --head-dim)"));
  if (!type.empty() || EndsWith(out, ".gguf")) return WriteSynthGguf(o, type.empty() ? dtype : type, out);
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST)
    return Fail(absl::FailedPreconditionError(out + ": cannot create"));
  int32_t bos = -1, eos = -1;
  if (absl::Status s = WriteTokenizer(out, o.vocab_size, &bos, &eos); !s.ok()) return Fail(s);
  o.bos_token_id = bos;
  o.eos_token_id = eos;
  if (absl::Status s = WriteSyntheticCheckpoint(o, out); !s.ok()) return Fail(s);
  std::cout << "wrote " << out << ": " << o.ToConfig().Summary() << ", " << DTypeName(o.dtype) << "\n";
  return 0;
}

int RunInfo(int argc, char** argv) {
  bool tensors = false;
  FlagSet flags("orca model info",
                "Prints a checkpoint's configuration and its tensor types (every tensor with --tensors).\n"
                "Usage: orca model info PATH");
  flags.AddBool("tensors", &tensors, "List every tensor with shape, type and size");
  if (absl::Status s = flags.Parse(argc, argv, 1, /*allow_positional=*/true); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (flags.positional().size() != 1) return Fail(absl::InvalidArgumentError("expected one checkpoint path"));
  auto ckpt = engine::Checkpoint::Open(flags.positional()[0]);
  if (!ckpt.ok()) return Fail(ckpt.status());
  std::cout << (*ckpt)->config().Summary() << "\n";
  // Tensors per type, with their bytes: what a quantized file is made of.
  std::cout << formats::TensorTypeSummary((*ckpt)->tensors(), tensors);
  return 0;
}

}  // namespace

std::string OrcaHome() {
  if (const char* h = std::getenv("ORCA_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/orca";
}

std::string DefaultModelPath() { return OrcaHome() + "/models/default-llama-25m"; }

std::string EnsureDefaultModel() {
  const std::string path = DefaultModelPath();
  struct stat st {};
  if (::stat((path + "/model.safetensors").c_str(), &st) == 0) return path;
  std::error_code ec;
  std::filesystem::create_directories(OrcaHome() + "/models", ec);
  if (ec) {
    std::fprintf(stderr, "orca: cannot create %s/models: %s\n", OrcaHome().c_str(), ec.message().c_str());
    return "";
  }
  std::fprintf(stderr, "orca: synthesizing the default model (Llama-shaped, ~25M parameters) into %s\n", path.c_str());
  std::string a0 = "orca model synth", a1 = "--preset=default", a2 = "--out=" + path;
  char* args[] = {a0.data(), a1.data(), a2.data()};
  if (RunSynth(3, args) != 0) return "";
  return path;
}

int RunModel(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cout << "Usage: orca model synth [flags] | orca model info PATH | orca model quantize SRC DST --type T\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  std::string name = std::string(argv[0]) + " " + sub;
  argv[1] = name.data();
  if (sub == "synth") return RunSynth(argc - 1, argv + 1);
  if (sub == "info") return RunInfo(argc - 1, argv + 1);
  if (sub == "quantize") return RunQuantize(argc - 1, argv + 1);
  std::fprintf(stderr, "orca model: unknown subcommand '%s'\n", sub.c_str());
  return 2;
}

}  // namespace orca::cli
