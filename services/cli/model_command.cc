// `orca model synth` and `orca model info`.

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/mapped_file.h"
#include "core/engine/checkpoint.h"
#include "core/engine/synthetic_checkpoint.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/tokenizer.h"
#include "services/cli/commands.h"

namespace orca::cli {
namespace {

struct Preset {
  const char* name;
  const char* arch;
  int hidden, layers, heads, kv_heads, ffn, vocab;
};
// "25m" and "135m" are the engine benchmark's Llama shapes (the latter is
// SmolLM-135M's); "default" is what `orca serve` synthesizes on first run: the
// 25m shape with the tokenizer's natural vocabulary (vocab 0 below), so every
// token it can sample decodes to real text.
constexpr Preset kPresets[] = {
    {"tiny", "llama", 64, 2, 4, 2, 192, 512},     {"default", "llama", 512, 8, 8, 4, 1408, 0},
    {"25m", "llama", 512, 8, 8, 4, 1408, 8192},   {"135m", "llama", 576, 30, 9, 3, 1536, 49152},
    {"gpt2-tiny", "gpt2", 64, 2, 4, 4, 256, 512},
};

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

int RunSynth(int argc, char** argv) {
  std::string preset, arch = "llama", out, dtype = "bf16";
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, max_position = 2048, seed = 0;
  bool tie = true, attention_bias = false;
  FlagSet flags("orca model synth",
                "Writes a deterministic random-weight checkpoint (config.json, model.safetensors, tokenizer.json,\n"
                "tokenizer_config.json) for tests, benchmarks and the default model. Same flags, same bytes.");
  flags.AddString("out", &out, "Output directory (required)");
  flags.AddString("preset", &preset, "Shape preset: tiny, default, 25m, 135m, gpt2-tiny (flags below override it)");
  flags.AddString("arch", &arch, "llama or gpt2");
  flags.AddInt("hidden-size", &hidden, "Hidden size");
  flags.AddInt("num-layers", &layers, "Transformer layers");
  flags.AddInt("num-heads", &heads, "Attention heads");
  flags.AddInt("num-kv-heads", &kv_heads, "KV heads (llama; grouped-query attention)");
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
  }
  if (arch == "llama")
    o.arch = engine::ModelArch::kLlama;
  else if (arch == "gpt2")
    o.arch = engine::ModelArch::kGpt2;
  else
    return Fail(absl::InvalidArgumentError("--arch must be llama or gpt2"));
  if (hidden) o.hidden_size = static_cast<int32_t>(hidden);
  if (layers) o.num_layers = static_cast<int32_t>(layers);
  if (heads) o.num_heads = static_cast<int32_t>(heads);
  if (kv_heads) o.num_kv_heads = static_cast<int32_t>(kv_heads);
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
  if (o.hidden_size % o.num_heads != 0)
    return Fail(absl::InvalidArgumentError("--hidden-size must be divisible by --num-heads"));
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
                "Prints a checkpoint's configuration (and tensors with --tensors).\nUsage: orca model info PATH");
  flags.AddBool("tensors", &tensors, "List every tensor with shape and dtype");
  if (absl::Status s = flags.Parse(argc, argv, 1, /*allow_positional=*/true); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (flags.positional().size() != 1) return Fail(absl::InvalidArgumentError("expected one checkpoint path"));
  auto ckpt = engine::Checkpoint::Open(flags.positional()[0]);
  if (!ckpt.ok()) return Fail(ckpt.status());
  std::cout << (*ckpt)->config().Summary() << "\n";
  if (tensors)
    for (const auto& name : (*ckpt)->tensors().Names()) {
      const formats::TensorInfo* t = (*ckpt)->tensors().Find(name);
      std::cout << "  " << name << " " << t->ShapeString() << " "
                << (t->unsupported.empty() ? DTypeName(t->dtype) : "unsupported") << "\n";
    }
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
    std::cout << "Usage: orca model synth [flags] | orca model info PATH\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  std::string name = std::string(argv[0]) + " " + sub;
  argv[1] = name.data();
  if (sub == "synth") return RunSynth(argc - 1, argv + 1);
  if (sub == "info") return RunInfo(argc - 1, argv + 1);
  std::fprintf(stderr, "orca model: unknown subcommand '%s'\n", sub.c_str());
  return 2;
}

}  // namespace orca::cli
