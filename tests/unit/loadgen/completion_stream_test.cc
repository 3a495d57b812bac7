// Reading one streamed completion: TTFT, inter-token gaps, token counts (usage, chunks,
// logprobs), error events and truncated streams. Times are passed in, so nothing here
// depends on a clock.

#include "core/loadgen/completion_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orca::loadgen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Chunk(const std::string& text) {
  return "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"" + text +
         "\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
}
const char kFinal[] = "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
const char kUsage[] =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,\"total_tokens\":9}}\n\n";
const char kDone[] = "data: [DONE]\n\n";

TEST(CompletionStreamTest, MeasuresTtftGapsAndTakesTheCountFromUsage) {
  CompletionStream stream;
  ASSERT_TRUE(stream.OnBytes(Chunk("A"), 0.10).ok());
  ASSERT_TRUE(stream.OnBytes(Chunk("B"), 0.15).ok());
  // Two chunks in one read: the second gap is 0 (they arrived together).
  ASSERT_TRUE(stream.OnBytes(Chunk("C") + Chunk("D"), 0.35).ok());
  ASSERT_TRUE(stream.OnBytes(std::string(kFinal) + kUsage + kDone, 0.40).ok());
  RequestRecord r;
  ASSERT_TRUE(stream.Finish(0.41, &r).ok());
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.10);
  EXPECT_DOUBLE_EQ(r.e2e_s, 0.41);
  ASSERT_EQ(r.itl_s.size(), 3u);
  EXPECT_NEAR(r.itl_s[0], 0.05, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.20, 1e-12);
  EXPECT_NEAR(r.itl_s[2], 0.0, 1e-12);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.counted_tokens, 4);
  EXPECT_EQ(r.num_chunks, 4);
  EXPECT_TRUE(r.usage_reported);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_NEAR(r.NormalizedLatencySeconds(), 0.41 / 4, 1e-12);
}

TEST(CompletionStreamTest, UsageWinsOverChunksThatHeldBackText) {
  // The server held back a partial UTF-8 character: 3 tokens, 2 text chunks.
  CompletionStream stream;
  ASSERT_TRUE(stream.OnBytes(Chunk("x") + Chunk("") + Chunk("y"), 0.1).ok());
  ASSERT_TRUE(
      stream.OnBytes("data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n", 0.2).ok());
  RequestRecord r;
  ASSERT_TRUE(stream.Finish(0.2, &r).ok());
  EXPECT_EQ(r.counted_tokens, 2);
  EXPECT_EQ(r.output_tokens, 3);
}

TEST(CompletionStreamTest, CountsChunksWithoutUsageAndLogprobTokensExactly) {
  CompletionStream plain;
  ASSERT_TRUE(plain.OnBytes(Chunk("a") + Chunk("b") + kDone, 0.2).ok());
  RequestRecord r;
  ASSERT_TRUE(plain.Finish(0.2, &r).ok());
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 2);

  CompletionStream logprobs;
  ASSERT_TRUE(logprobs
                  .OnBytes("data: {\"choices\":[{\"text\":\"ab\",\"logprobs\":{\"tokens\":[\"a\",\"b\"],"
                           "\"token_logprobs\":[-1,-2]}}]}\n\n"
                           "data: {\"choices\":[{\"text\":\"\",\"logprobs\":{\"tokens\":[\"\\u00e9\"]}}]}\n\n",
                           0.3)
                  .ok());
  ASSERT_TRUE(logprobs.OnBytes(kDone, 0.4).ok());
  ASSERT_TRUE(logprobs.Finish(0.4, &r).ok());
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.num_chunks, 2);
}

// return_token_ids: the chunks' token_ids are collected in order, each counts its ids (also a chunk whose text was
// held back), and a malformed id is data loss. Without them, nothing is reported.
TEST(CompletionStreamTest, CollectsReturnedTokenIds) {
  auto with_ids = [](const std::string& text, const std::string& ids) {
    return "data: {\"choices\":[{\"index\":0,\"text\":\"" + text + "\",\"token_ids\":" + ids +
           ",\"finish_reason\":null}]}\n\n";
  };
  CompletionStream stream;
  ASSERT_TRUE(stream.OnBytes(with_ids("a", "[17]") + with_ids("", "[250]") + with_ids("bc", "[3, 4]"), 0.1).ok());
  ASSERT_TRUE(stream.OnBytes(std::string(kFinal) + kDone, 0.2).ok());
  RequestRecord r;
  ASSERT_TRUE(stream.Finish(0.2, &r).ok());
  EXPECT_TRUE(r.token_ids_reported);
  EXPECT_THAT(r.output_token_ids, ElementsAre(17, 250, 3, 4));
  EXPECT_EQ(r.counted_tokens, 4);
  EXPECT_EQ(r.num_chunks, 3);

  CompletionStream plain;
  ASSERT_TRUE(plain.OnBytes(Chunk("x") + kFinal + kDone, 0.1).ok());
  RequestRecord p;
  ASSERT_TRUE(plain.Finish(0.1, &p).ok());
  EXPECT_FALSE(p.token_ids_reported);
  EXPECT_TRUE(p.output_token_ids.empty());

  CompletionStream bad;
  EXPECT_EQ(bad.OnBytes(with_ids("a", "[\"x\"]"), 0.1).code(), absl::StatusCode::kDataLoss);
}

TEST(CompletionStreamTest, ReadsChatDeltasToo) {
  CompletionStream stream;
  ASSERT_TRUE(stream
                  .OnBytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
                           "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
                           "data: [DONE]\n\n",
                           0.5)
                  .ok());
  RequestRecord r;
  ASSERT_TRUE(stream.Finish(0.5, &r).ok());
  EXPECT_EQ(r.output_tokens, 1);
}

TEST(CompletionStreamTest, SameResultWhereverTheBodyIsSplit) {
  const std::string body = Chunk("A") + Chunk("B") + kFinal + kUsage + kDone;
  for (size_t i = 0; i <= body.size(); ++i) {
    CompletionStream stream;
    ASSERT_TRUE(stream.OnBytes(body.substr(0, i), 1.0).ok());
    ASSERT_TRUE(stream.OnBytes(body.substr(i), 2.0).ok());
    RequestRecord r;
    ASSERT_TRUE(stream.Finish(2.0, &r).ok()) << "split at " << i;
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_EQ(r.counted_tokens, 2);
    EXPECT_EQ(r.num_chunks, 2);
  }
}

TEST(CompletionStreamTest, ErrorEventsFailTheRequest) {
  for (const std::string& event :
       {std::string("data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"),
        std::string("data: {\"object\":\"error\",\"message\":\"overloaded\"}\n\n"),
        std::string("data: {\"error\":\"overloaded\"}\n\n")}) {
    CompletionStream stream;
    ASSERT_TRUE(stream.OnBytes(Chunk("a"), 0.1).ok());
    const absl::Status status = stream.OnBytes(event, 0.2);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << event;
    EXPECT_THAT(std::string(status.message()), HasSubstr("overloaded"));
  }
}

TEST(CompletionStreamTest, MalformedOrTruncatedStreamsAreDataLoss) {
  CompletionStream garbage;
  EXPECT_EQ(garbage.OnBytes("data: {not json\n\n", 0.1).code(), absl::StatusCode::kDataLoss);
  CompletionStream array;
  EXPECT_EQ(array.OnBytes("data: [1,2]\n\n", 0.1).code(), absl::StatusCode::kDataLoss);

  RequestRecord r;
  CompletionStream no_done;
  ASSERT_TRUE(no_done.OnBytes(Chunk("a"), 0.1).ok());
  EXPECT_THAT(std::string(no_done.Finish(0.2, &r).message()), HasSubstr("without [DONE]"));
  EXPECT_EQ(r.output_tokens, 1);  // what arrived is still recorded

  CompletionStream cut;
  ASSERT_TRUE(cut.OnBytes(Chunk("a") + "data: {\"choi", 0.1).ok());
  EXPECT_THAT(std::string(cut.Finish(0.2, &r).message()), HasSubstr("cut inside an event"));

  CompletionStream empty;
  ASSERT_TRUE(empty.OnBytes(kDone, 0.1).ok());
  EXPECT_THAT(std::string(empty.Finish(0.1, &r).message()), HasSubstr("no token"));
}

TEST(CompletionStreamTest, IgnoresEverythingAfterDone) {
  CompletionStream stream;
  ASSERT_TRUE(stream.OnBytes(Chunk("a") + kDone + Chunk("b") + "data: garbage\n\n", 0.1).ok());
  RequestRecord r;
  ASSERT_TRUE(stream.Finish(0.1, &r).ok());
  EXPECT_EQ(r.output_tokens, 1);
  EXPECT_THAT(r.itl_s, ElementsAre());
}

}  // namespace
}  // namespace orca::loadgen
