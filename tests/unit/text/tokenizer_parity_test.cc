// Parity with @huggingface/tokenizers: the reference ids and decodes are
// produced by tests/text_parity/tokenizer_reference.mjs (run first as a CTest
// fixture) for real tokenizer files (Llama-2, Llama-3, Qwen3, GPT-2, tiny-gpt2).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/text/incremental_detokenizer.h"
#include "core/text/tokenizer.h"

namespace orca::text {
namespace {

using nlohmann::json;

std::string Show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

class TokenizerParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("ORCA_TEXT_PARITY_DIR");
    if (dir == nullptr) GTEST_SKIP() << "ORCA_TEXT_PARITY_DIR not set (run through ctest)";
    std::ifstream in(std::string(dir) + "/tokenizer_reference.json");
    if (!in) GTEST_SKIP() << "no reference file in " << dir << " (the node fixture did not run)";
    std::stringstream ss;
    ss << in.rdbuf();
    reference_ = json::parse(ss.str());
    if (reference_.contains("skipped")) GTEST_SKIP() << reference_["skipped"].get<std::string>();
  }
  json reference_;
};

TEST_F(TokenizerParityTest, EncodeAndDecodeMatchHuggingFace) {
  ASSERT_GE(reference_["tokenizers"].size(), 4u);
  for (const json& t : reference_["tokenizers"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    auto tok = Tokenizer::Load(t["dir"].get<std::string>());
    ASSERT_TRUE(tok.ok()) << tok.status();
    int failures = 0;
    for (const json& c : t["cases"]) {
      const std::string text = c["text"];
      const auto want = c["ids"].get<std::vector<int32_t>>();
      const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
      const auto got = (*tok)->Encode(text, true);
      const auto got_plain = (*tok)->Encode(text, false);
      EXPECT_EQ(got, want) << name << " text=" << json(text).dump() << "\n got " << Show(got) << "\nwant "
                           << Show(want);
      EXPECT_EQ(got_plain, want_plain) << name << " text=" << json(text).dump();
      if (c.contains("gpt3_encoder_ids")) {
        EXPECT_EQ(got_plain, c["gpt3_encoder_ids"].get<std::vector<int32_t>>()) << "gpt-3-encoder disagrees";
      }
      if (!want.empty()) {
        auto decoded = (*tok)->Decode(want, false);
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << name << " text=" << json(text).dump();
        auto decoded_skip = (*tok)->Decode(want, true);
        ASSERT_TRUE(decoded_skip.ok());
        EXPECT_EQ(*decoded_skip, c["decoded_skip"].get<std::string>()) << name << " text=" << json(text).dump();
      }
      if (HasFailure() && ++failures > 5) return;
    }
    for (const json& r : t["random"]) {
      const auto ids = r["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        auto decoded = (*tok)->Decode(ids, skip);
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        EXPECT_EQ(*decoded, r[skip ? "decoded_skip" : "decoded"].get<std::string>())
            << name << " ids=" << Show(ids) << " skip=" << skip;
        // Streaming gives the same text.
        IncrementalDetokenizer detok(**tok, {}, skip);
        std::string streamed;
        for (int32_t id : ids) streamed += detok.Add(id);
        streamed += detok.Flush();
        EXPECT_EQ(streamed, *decoded) << name << " ids=" << Show(ids);
      }
      if (HasFailure() && ++failures > 5) return;
    }
  }
}

}  // namespace
}  // namespace orca::text
