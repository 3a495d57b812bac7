#pragma once
/// Configuration readers the families share: typed config.json fields with precise errors, and the
/// hyper-parameters of rotary decoder-only models (Llama and its descendants) from config.json and GGUF.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/engine/model_config.h"

namespace orca::formats {
class GgufFile;
}  // namespace orca::formats

namespace orca::engine {

/// An integer field; `dflt` when absent or null (nullopt: required). Errors name `src` and the key.
absl::StatusOr<int64_t> IntField(const nlohmann::json& j, const char* key, const std::string& src,
                                 std::optional<int64_t> dflt);
/// A number field, as IntField.
absl::StatusOr<double> NumField(const nlohmann::json& j, const char* key, const std::string& src,
                                std::optional<double> dflt);
/// A boolean field; `dflt` when absent or not a boolean.
bool BoolField(const nlohmann::json& j, const char* key, bool dflt);

/// The fields of a rotary decoder in config.json (Llama's names, which its descendants keep): sizes, heads,
/// `head_dim` (default hidden / heads), `partial_rotary_factor`, `rms_norm_eps`, `rope_theta`, `rope_scaling`,
/// biases, tied embeddings, `hidden_act` (silu only), and a sliding window where `use_sliding_window` (default:
/// Mistral's) says it applies (every layer local).
absl::Status ParseRotaryDecoderHf(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                                  ModelConfig* c);
/// The GGUF keys of a rotary decoder under `{arch}.`: RMSNorm epsilon, RoPE base, dimension count and scaling
/// (with Llama 3's `rope_freqs.weight`), Q/K/V biases by their tensors; mixture-of-experts files refused.
/// `yarn_log_multiplier`: the family reads `rope.scaling.yarn_log_multiplier` as llama.cpp's mistral3 does (YaRN's
/// magnitude mscale(factor, 1) / mscale(factor, m)); otherwise a file with that key is refused.
absl::Status ReadRotaryDecoderGguf(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                                   ModelConfig* c, bool yarn_log_multiplier = false);
/// YaRN's magnitude for a scaling factor and an mscale multiplier: 1 + 0.1 · mscale · ln(factor), 1 when
/// factor ≤ 1 (transformers' get_mscale, llama.cpp's llama_context).
double YarnMscale(double factor, double mscale);

}  // namespace orca::engine
