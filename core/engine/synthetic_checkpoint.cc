#include "core/engine/synthetic_checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/mapped_file.h"
#include "core/common/split_mix64.h"
#include "core/common/status_macros.h"
#include "core/engine/models/model_family.h"

namespace orca::engine {
namespace {

using TensorSpec = SynthTensorSpec;

uint64_t Hash(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// xoshiro256** with Box-Muller: fast, and identical on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    SplitMix64 seeder(seed);  // xoshiro's recommended seeding
    for (auto& v : s_) v = seeder.Next();
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2 * M_PI * u2;
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

std::vector<TensorSpec> Specs(const SyntheticModelOptions& o, const ModelConfig& c) {
  return FamilyOf(o.arch).synth_tensors(c);
}

// The values of one tensor: its own generator, seeded by its name.
void Fill(const TensorSpec& t, uint64_t seed, float* out, int64_t n) {
  Rng rng(Hash(t.name, seed));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.init) {
      case TensorSpec::Init::kNormal:
        out[i] = static_cast<float>(rng.Normal() * t.stddev);
        break;
      case TensorSpec::Init::kOnes:
        out[i] = 1.0f;
        break;
      case TensorSpec::Init::kZeros:
        out[i] = 0.0f;
        break;
      case TensorSpec::Init::kAroundOne:
        out[i] = static_cast<float>(1.0 + rng.Normal() * t.stddev);
        break;
    }
  }
}

nlohmann::json ConfigJson(const SyntheticModelOptions& o, const ModelConfig& c) {
  nlohmann::json j;
  FamilyOf(o.arch).synth_config_json(c, &j);
  j["torch_dtype"] = o.dtype == DType::kF32 ? "float32" : (o.dtype == DType::kF16 ? "float16" : "bfloat16");
  if (o.bos_token_id >= 0) j["bos_token_id"] = o.bos_token_id;
  if (o.eos_token_id >= 0) j["eos_token_id"] = o.eos_token_id;
  j["orca_synthetic"] = {{"seed", o.seed}};
  return j;
}

}  // namespace

ModelConfig SyntheticModelOptions::ToConfig() const {
  ModelConfig c;
  c.arch = arch;
  c.hidden_size = hidden_size;
  c.num_layers = num_layers;
  c.num_heads = num_heads;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim > 0 ? head_dim : (num_heads > 0 ? hidden_size / num_heads : 0);
  if (intermediate_size > 0)
    c.intermediate_size = intermediate_size;
  else if (arch == ModelArch::kGpt2)
    c.intermediate_size = 4 * hidden_size;
  else
    c.intermediate_size = (hidden_size * 8 / 3 + 31) / 32 * 32;
  c.vocab_size = vocab_size;
  c.max_position = max_position;
  c.tie_word_embeddings = tie_word_embeddings;
  c.attention_bias = attention_bias;
  c.rope_theta = rope_theta;
  c.rope_scaling = rope_scaling;
  c.attn_temperature_scale = attn_temperature_scale;
  c.rotary_dim = static_cast<int32_t>(c.head_dim * partial_rotary_factor) / 2 * 2;
  c.rope_theta_local = rope_theta_local;
  c.sliding_window = sliding_window;
  if (sliding_window_pattern > 0)
    for (int32_t l = 0; l < num_layers; ++l) c.local_layers.push_back((l + 1) % sliding_window_pattern != 0);
  FamilyOf(arch).synth_config(&c);  // the family's fixed features (GPT-2: no RoPE, biases everywhere, ...)
  return c;
}

absl::Status WriteSyntheticCheckpoint(const SyntheticModelOptions& o, const std::string& dir) {
  const ModelConfig c = o.ToConfig();
  ORCA_RETURN_IF_ERROR(c.Validate());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return absl::FailedPreconditionError(absl::StrCat(dir, ": cannot create directory: ", std::strerror(errno)));
  const std::vector<TensorSpec> specs = Specs(o, c);
  const char* dtype_name = o.dtype == DType::kF32 ? "F32" : (o.dtype == DType::kF16 ? "F16" : "BF16");
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"generator", "orca model synth"}};
  uint64_t offset = 0;
  for (const auto& t : specs) {
    uint64_t bytes = DTypeSize(o.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    header[t.name] = {{"dtype", dtype_name}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const std::string path = dir + "/model.safetensors";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::FailedPreconditionError(absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
    const uint64_t len = header_text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(header_text.data(), static_cast<std::streamsize>(len));
    std::vector<float> values;
    std::vector<uint8_t> encoded;
    for (const auto& t : specs) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      values.assign(static_cast<size_t>(n), 0.0f);
      Fill(t, o.seed, values.data(), n);
      encoded.resize(static_cast<size_t>(n) * DTypeSize(o.dtype));
      ConvertFromF32(values.data(), o.dtype, encoded.data(), values.size());
      out.write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(encoded.size()));
    }
    out.flush();
    if (!out) return absl::DataLossError(absl::StrCat(tmp, ": write failed (disk full?)"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::FailedPreconditionError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  return WriteStringToFile(dir + "/config.json", ConfigJson(o, c).dump(2) + "\n");
}

int64_t SyntheticTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<SyntheticTensor> SyntheticTensors(const SyntheticModelOptions& o) {
  std::vector<SyntheticTensor> out;
  for (const TensorSpec& t : Specs(o, o.ToConfig())) out.push_back({t.name, t.shape});
  return out;
}

void SyntheticTensorValues(const SyntheticModelOptions& o, const SyntheticTensor& tensor, float* out) {
  for (const TensorSpec& t : Specs(o, o.ToConfig()))
    if (t.name == tensor.name) return Fill(t, o.seed, out, tensor.NumElements());
}

}  // namespace orca::engine
