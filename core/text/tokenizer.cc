#include "core/text/tokenizer.h"

#include <filesystem>

#include "absl/status/status.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/text/hf_tokenizer_loader.h"

namespace orca::text {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(model_path);
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".gguf") {
      absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadGgufTokenizer(model_path);
      if (!t.ok()) return Annotate(t.status(), model_path);
      return t;
    }
    if (path.filename() == "tokenizer.json") return Load(path.parent_path().string());
    return absl::InvalidArgumentError(model_path + " is neither a model directory nor a .gguf file");
  }
  if (!fs::is_directory(path, ec)) return absl::NotFoundError("model path " + model_path + " does not exist");
  absl::StatusOr<std::string> tokenizer_json = ReadFileToString((path / "tokenizer.json").string());
  if (!tokenizer_json.ok()) {
    return absl::NotFoundError(model_path + " has no tokenizer.json (Orca reads Hugging Face tokenizer.json files)");
  }
  std::string config, generation;
  if (fs::exists(path / "tokenizer_config.json", ec)) {
    ORCA_ASSIGN_OR_RETURN(config, ReadFileToString((path / "tokenizer_config.json").string()));
  }
  if (fs::exists(path / "generation_config.json", ec)) {
    ORCA_ASSIGN_OR_RETURN(generation, ReadFileToString((path / "generation_config.json").string()));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadHfTokenizer(*tokenizer_json, config, generation);
  if (!t.ok()) return Annotate(t.status(), (path / "tokenizer.json").string());
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view tokenizer_json,
                                                               std::string_view tokenizer_config_json) {
  return LoadHfTokenizer(tokenizer_json, tokenizer_config_json, "");
}

}  // namespace orca::text
