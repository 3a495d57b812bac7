// Server-Sent Events parsing as OpenAI streams use it, including bytes split anywhere.

#include "core/loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orca::loadgen {
namespace {

std::vector<SseEvent> ParseAll(const std::vector<std::string>& chunks) {
  SseParser parser;
  std::vector<SseEvent> events;
  for (const std::string& chunk : chunks) {
    EXPECT_TRUE(parser.Feed(chunk, &events).ok());
  }
  return events;
}

std::vector<std::string> Data(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

TEST(SseParserTest, ParsesDataEventsCommentsAndFields) {
  const std::vector<SseEvent> events =
      ParseAll({": keep-alive\n"
                "data: {\"a\":1}\n\n"
                "event: update\n"
                "id: 7\n"
                "data:no-space\n"
                "data:  two spaces\n"
                "retry: 100\n"
                "\n"
                "data: [DONE]\n\n"});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[0].event, "");
  EXPECT_EQ(events[1].event, "update");
  EXPECT_EQ(events[1].id, "7");
  EXPECT_EQ(events[1].data, "no-space\n two spaces");  // one leading space is stripped
  EXPECT_EQ(events[2].data, "[DONE]");
}

TEST(SseParserTest, AcceptsEveryLineEnding) {
  EXPECT_EQ(Data(ParseAll({"data: a\r\n\r\ndata: b\r\rdata: c\n\n"})), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(SseParserTest, EmptyDataDispatchesAndEventsWithoutDataAreDropped) {
  EXPECT_EQ(Data(ParseAll({"event: ping\n\ndata:\n\n\n\n"})), (std::vector<std::string>{""}));
}

TEST(SseParserTest, SameEventsWhateverTheChunkBoundaries) {
  const std::string stream =
      "data: {\"choices\":[{\"text\":\"Hel\"}]}\r\n\r\n"
      ": comment\r\n"
      "data: {\"choices\":[{\"text\":\"lo\"}]}\n\n"
      "data: line1\r"
      "data: line2\r\r"
      "data: [DONE]\r\n\r\n";
  const std::vector<std::string> expected = Data(ParseAll({stream}));
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_EQ(expected[2], "line1\nline2");
  // Every single split point (including between '\r' and '\n') and every pair of them.
  for (size_t i = 0; i <= stream.size(); ++i) {
    EXPECT_EQ(Data(ParseAll({stream.substr(0, i), stream.substr(i)})), expected) << "split at " << i;
    for (size_t j = i; j <= stream.size(); j += 7) {
      EXPECT_EQ(Data(ParseAll({stream.substr(0, i), stream.substr(i, j - i), stream.substr(j)})), expected);
    }
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(Data(ParseAll(bytes)), expected);
}

TEST(SseParserTest, ReportsAPendingEventAtEndOfStream) {
  SseParser parser;
  std::vector<SseEvent> events;
  ASSERT_TRUE(parser.Feed("data: complete\n\ndata: cut", &events).ok());
  EXPECT_EQ(events.size(), 1u);
  EXPECT_TRUE(parser.has_pending());
  ASSERT_TRUE(parser.Feed("\n", &events).ok());
  EXPECT_TRUE(parser.has_pending());  // a data line, but no blank line yet
  ASSERT_TRUE(parser.Feed("\n", &events).ok());
  EXPECT_FALSE(parser.has_pending());
  EXPECT_EQ(events.size(), 2u);
}

TEST(SseParserTest, OversizedEventIsAnErrorAndTheParserStaysFailed) {
  SseParser parser(/*max_event_bytes=*/64);
  std::vector<SseEvent> events;
  EXPECT_TRUE(parser.Feed("data: small\n\n", &events).ok());
  const absl::Status status = parser.Feed("data: " + std::string(100, 'x'), &events);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  // Many short lines of one event count too.
  SseParser lines(64);
  absl::Status s;
  for (int i = 0; i < 20 && s.ok(); ++i) s = lines.Feed("data: 0123456789\n", &events);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(parser.Feed("\n\n", &events).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace orca::loadgen
