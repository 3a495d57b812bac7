#include "core/formats/context_length.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/formats/gguf_file.h"

namespace orca::formats {

namespace fs = std::filesystem;

absl::StatusOr<int32_t> ReadModelContextLength(const std::string& model_path) {
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    const std::string config_path = (fs::path(model_path) / "config.json").string();
    ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
    nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) return absl::InvalidArgumentError(config_path + " is not a JSON object");
    for (const char* key : {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"}) {
      auto it = config.find(key);
      if (it != config.end() && it->is_number_integer() && it->get<int64_t>() > 0) {
        return static_cast<int32_t>(std::min<int64_t>(it->get<int64_t>(), std::numeric_limits<int32_t>::max()));
      }
    }
    return absl::NotFoundError(config_path + " declares no context length");
  }
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(model_path));
  ORCA_ASSIGN_OR_RETURN(std::string arch, gguf->GetString("general.architecture"));
  ORCA_ASSIGN_OR_RETURN(int64_t context, gguf->GetInt(arch + ".context_length"));
  if (context <= 0) return absl::NotFoundError(model_path + ": non-positive context_length");
  return static_cast<int32_t>(std::min<int64_t>(context, std::numeric_limits<int32_t>::max()));
}

}  // namespace orca::formats
