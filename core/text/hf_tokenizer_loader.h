#pragma once
/// Loaders that turn a model's tokenizer files into a PipelineTokenizer.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/text/tokenizer.h"

namespace orca::text {

/// tokenizer.json text (+ optional tokenizer_config.json and
/// generation_config.json texts, "" when absent).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json,
                                                           std::string_view generation_config_json);

/// The vocabulary embedded in a GGUF file (tokenizer.ggml.model "llama" or "gpt2").
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path);

}  // namespace orca::text
