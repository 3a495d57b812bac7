#pragma once
/// The context length a checkpoint declares, read from its files without
/// loading any weights: what the gateway needs to bound prompts.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace orca::formats {

/// The context length a model declares: a directory's config.json
/// (max_position_embeddings, n_positions, n_ctx, max_seq_len, seq_length, the
/// first positive one) or a GGUF file's `<arch>.context_length`. Values above
/// INT32_MAX are clamped. NotFound when the model declares none; other errors
/// when the files cannot be read or parsed.
absl::StatusOr<int32_t> ReadModelContextLength(const std::string& model_path);

}  // namespace orca::formats
