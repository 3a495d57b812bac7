#pragma once
/// Writes models as GGUF files that Orca and llama.cpp both load: from a
/// Hugging Face checkpoint, from another GGUF file (re-encoding its tensors),
/// or from a synthetic model generated tensor by tensor (any size, never
/// whole in memory). Tensor types follow a QuantMix (quant_mix.h).
///
/// From Hugging Face layout the writer does what llama.cpp's converter does:
/// GGUF tensor names, llama-architecture Q/K rows permuted for adjacent-pair
/// RoPE (qwen2 keeps rotate-half), GPT-2 Conv1D matrices transposed to
/// [out, in], the architecture's hyper-parameters, and a byte-level BPE
/// tokenizer.json as tokenizer.ggml.* (tokens, types, merges, BOS/EOS, chat
/// template); tensors in llama.cpp's order (global ones, then per layer).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/convert/quant_mix.h"
#include "core/engine/synthetic_checkpoint.h"

namespace orca::convert {

struct ExportOptions {
  QuantMix mix = QuantMix::kQ8_0;
  /// Threads quantizing rows (0 = all cores).
  int num_threads = 0;
};

struct ExportReport {
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    DType from;
    DType to;
    std::string note;  ///< a type fallback, if any
  };
  std::vector<Tensor> tensors;
  size_t bytes_written = 0;
  std::vector<std::string> notes;  ///< about the file as a whole (e.g. tokenizer)
};

/// `src`: a Hugging Face directory or a .gguf file. `dst`: the .gguf to write.
absl::StatusOr<ExportReport> QuantizeCheckpoint(const std::string& src, const std::string& dst,
                                                const ExportOptions& options);

/// A synthetic model (synthetic_checkpoint.h) straight to GGUF, with the
/// tokenizer given as Hugging Face tokenizer.json / tokenizer_config.json
/// text (empty: no tokenizer, tokenizer.ggml.model "none").
absl::StatusOr<ExportReport> WriteSyntheticGguf(const engine::SyntheticModelOptions& model,
                                                const std::string& tokenizer_json,
                                                const std::string& tokenizer_config_json, const std::string& dst,
                                                const ExportOptions& options);

}  // namespace orca::convert
