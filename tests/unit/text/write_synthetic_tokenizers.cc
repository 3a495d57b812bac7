// Test-only helper: writes synthetic tokenizers of a few vocabulary sizes to
// <out_dir>/synthetic-<V>/ so that tokenizer_reference.mjs can check them with
// @huggingface/tokenizers (a CTest fixture runs this first).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/text/synthetic_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_synthetic_tokenizers <out_dir>\n";
    return 2;
  }
  for (int32_t vocab_size : {300, 1000, 50000}) {
    auto files = orca::text::MakeSyntheticByteLevelTokenizer(vocab_size);
    if (!files.ok()) {
      std::cerr << files.status() << "\n";
      return 1;
    }
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / ("synthetic-" + std::to_string(vocab_size));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << files->tokenizer_json;
    std::ofstream(dir / "tokenizer_config.json") << files->tokenizer_config_json;
    std::ofstream(dir / "generation_config.json") << files->generation_config_json;
    std::cout << "wrote " << dir.string() << "\n";
  }
  return 0;
}
