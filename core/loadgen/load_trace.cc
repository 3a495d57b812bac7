#include "core/loadgen/load_trace.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "core/common/mapped_file.h"
#include "core/common/split_mix64.h"
#include "core/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen {
namespace {

using json = nlohmann::json;

constexpr const char* kArrivalKeys[] = {"arrival_s", "arrival_time", "timestamp"};
constexpr const char* kPromptKeys[] = {"prompt_tokens", "input_tokens"};
constexpr const char* kOutputKeys[] = {"max_tokens", "output_tokens"};

/// One parsed row before sorting.
struct Row {
  double arrival_s = 0;
  int64_t prompt_tokens = 0;
  int64_t max_new_tokens = 0;
  std::vector<PromptSegment> segments;
};

absl::Status RowError(const std::string& source, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", what));
}

absl::Status CheckRow(const Row& row, const std::string& source, int line) {
  if (!std::isfinite(row.arrival_s) || row.arrival_s < 0) {
    return RowError(source, line, absl::StrCat("arrival must be a finite number >= 0 (got ", row.arrival_s, ")"));
  }
  if (row.prompt_tokens < 1 || row.prompt_tokens > (int64_t{1} << 24)) {
    return RowError(source, line, absl::StrCat("prompt tokens must be in [1, 16777216] (got ", row.prompt_tokens, ")"));
  }
  if (row.max_new_tokens < 1 || row.max_new_tokens > (int64_t{1} << 24)) {
    return RowError(source, line, absl::StrCat("max tokens must be in [1, 16777216] (got ", row.max_new_tokens, ")"));
  }
  return absl::OkStatus();
}

/// The value of the first of `keys` present in `object`, as a number.
absl::StatusOr<double> JsonNumber(const json& object, absl::Span<const char* const> keys, const std::string& source,
                                  int line) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    if (!it->is_number()) return RowError(source, line, absl::StrCat("'", key, "' must be a number"));
    return it->get<double>();
  }
  return RowError(source, line, absl::StrCat("missing '", keys[0], "'"));
}

absl::StatusOr<int64_t> WholeNumber(double value, const char* what, const std::string& source, int line) {
  if (!std::isfinite(value) || value != std::floor(value) || std::fabs(value) > 1e15) {
    return RowError(source, line, absl::StrCat(what, " must be a whole number (got ", value, ")"));
  }
  return static_cast<int64_t>(value);
}

/// The optional "segments": [[key, tokens], ...] of a JSONL row; they must sum to the prompt.
absl::StatusOr<std::vector<PromptSegment>> ParseSegments(const json& object, int64_t prompt_tokens,
                                                         const std::string& source, int line) {
  std::vector<PromptSegment> segments;
  auto it = object.find("segments");
  if (it == object.end()) return segments;
  if (!it->is_array()) return RowError(source, line, "'segments' must be an array of [key, tokens] pairs");
  int64_t total = 0;
  for (const json& s : *it) {
    if (!s.is_array() || s.size() != 2 || !s[0].is_number_unsigned() || !s[1].is_number_integer() ||
        s[1].get<int64_t>() < 1 || s[1].get<int64_t>() > prompt_tokens) {
      return RowError(source, line, absl::StrCat("segment ", s.dump(), " is not [key >= 0, tokens >= 1]"));
    }
    segments.push_back({s[0].get<uint64_t>(), s[1].get<int32_t>()});
    total += s[1].get<int64_t>();
  }
  if (total != prompt_tokens) {
    return RowError(source, line, absl::StrCat("segments sum to ", total, " tokens, prompt_tokens is ", prompt_tokens));
  }
  return segments;
}

absl::StatusOr<std::vector<Row>> ParseJsonl(const std::vector<absl::string_view>& lines, const std::string& source) {
  std::vector<Row> rows;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int line = static_cast<int>(i) + 1;
    const std::string text(absl::StripAsciiWhitespace(lines[i]));
    if (text.empty()) continue;
    const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded() || !object.is_object()) {
      return RowError(source, line, "not a JSON object");
    }
    Row row;
    ORCA_ASSIGN_OR_RETURN(row.arrival_s, JsonNumber(object, kArrivalKeys, source, line));
    ORCA_ASSIGN_OR_RETURN(const double prompt, JsonNumber(object, kPromptKeys, source, line));
    ORCA_ASSIGN_OR_RETURN(const double output, JsonNumber(object, kOutputKeys, source, line));
    ORCA_ASSIGN_OR_RETURN(row.prompt_tokens, WholeNumber(prompt, "prompt tokens", source, line));
    ORCA_ASSIGN_OR_RETURN(row.max_new_tokens, WholeNumber(output, "max tokens", source, line));
    ORCA_RETURN_IF_ERROR(CheckRow(row, source, line));
    ORCA_ASSIGN_OR_RETURN(row.segments, ParseSegments(object, row.prompt_tokens, source, line));
    rows.push_back(row);
  }
  return rows;
}

/// Index of the first header cell that is one of `keys`.
std::optional<size_t> FindColumn(const std::vector<std::string>& header, absl::Span<const char* const> keys) {
  for (const char* key : keys) {
    auto it = std::find(header.begin(), header.end(), key);
    if (it != header.end()) return static_cast<size_t>(it - header.begin());
  }
  return std::nullopt;
}

std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, ',')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  return cells;
}

absl::StatusOr<std::vector<Row>> ParseCsv(const std::vector<absl::string_view>& lines, const std::string& source) {
  size_t first = 0;
  while (first < lines.size() && absl::StripAsciiWhitespace(lines[first]).empty()) ++first;
  if (first == lines.size()) return std::vector<Row>{};
  const std::vector<std::string> header = SplitCsvLine(lines[first]);
  const std::optional<size_t> arrival = FindColumn(header, kArrivalKeys);
  const std::optional<size_t> prompt = FindColumn(header, kPromptKeys);
  const std::optional<size_t> output = FindColumn(header, kOutputKeys);
  if (!arrival || !prompt || !output) {
    return RowError(source, static_cast<int>(first) + 1,
                    "the CSV header must name arrival_s (or arrival_time, timestamp), "
                    "prompt_tokens (or input_tokens) and max_tokens (or output_tokens)");
  }
  std::vector<Row> rows;
  for (size_t i = first + 1; i < lines.size(); ++i) {
    const int line = static_cast<int>(i) + 1;
    if (absl::StripAsciiWhitespace(lines[i]).empty()) continue;
    const std::vector<std::string> cells = SplitCsvLine(lines[i]);
    if (cells.size() != header.size()) {
      return RowError(source, line, absl::StrCat("expected ", header.size(), " columns, got ", cells.size()));
    }
    Row row;
    if (!absl::SimpleAtod(cells[*arrival], &row.arrival_s)) {
      return RowError(source, line, absl::StrCat("arrival '", cells[*arrival], "' is not a number"));
    }
    if (!absl::SimpleAtoi(cells[*prompt], &row.prompt_tokens)) {
      return RowError(source, line, absl::StrCat("prompt tokens '", cells[*prompt], "' is not an integer"));
    }
    if (!absl::SimpleAtoi(cells[*output], &row.max_new_tokens)) {
      return RowError(source, line, absl::StrCat("max tokens '", cells[*output], "' is not an integer"));
    }
    ORCA_RETURN_IF_ERROR(CheckRow(row, source, line));
    rows.push_back(row);
  }
  return rows;
}

absl::Status ValidateSynthetic(const LoadTraceOptions& options) {
  if (options.num_requests < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_requests must be >= 1 (got ", options.num_requests, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

TraceKind ParseTraceKind(const std::string& trace) {
  if (trace == "paper") return TraceKind::kPaper;
  if (trace == "homogeneous") return TraceKind::kHomogeneous;
  if (trace == "chat") return TraceKind::kChat;
  return TraceKind::kFile;
}

namespace {

absl::Status ValidateChat(const LoadTraceOptions& o) {
  ORCA_RETURN_IF_ERROR(ValidateSynthetic(o));
  auto range = [](const char* name, int32_t lo, int32_t hi, int32_t min) -> absl::Status {
    if (lo < min || hi < lo) {
      return absl::InvalidArgumentError(absl::StrCat(name, " needs ", min, " <= min <= max (got ", lo, ", ", hi, ")"));
    }
    return absl::OkStatus();
  };
  ORCA_RETURN_IF_ERROR(range("chat_system_tokens", o.chat_system_tokens_min, o.chat_system_tokens_max, 0));
  ORCA_RETURN_IF_ERROR(range("chat_turns", o.chat_turns_min, o.chat_turns_max, 1));
  ORCA_RETURN_IF_ERROR(range("chat_user_tokens", o.chat_user_tokens_min, o.chat_user_tokens_max, 1));
  ORCA_RETURN_IF_ERROR(range("new tokens", o.min_new_tokens, o.max_new_tokens, 1));
  if (o.chat_conversations < 1) return absl::InvalidArgumentError("chat_conversations must be >= 1");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TraceRequest>> MakeChatTrace(const LoadTraceOptions& o) {
  ORCA_RETURN_IF_ERROR(ValidateChat(o));
  // Arrivals exactly as the paper trace's; lengths and structure from their own stream.
  TraceOptions arrivals;
  arrivals.seed = o.seed;
  arrivals.arrival_rate = o.arrival_rate;
  arrivals.num_requests = o.num_requests;
  ORCA_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, GeneratePoissonTrace(arrivals));
  SplitMix64 rng(o.seed * 0x2545f4914f6cdd1dULL + 0xc4a7);
  constexpr uint64_t kSystemKey = 1;
  const auto system_tokens = static_cast<int32_t>(rng.NextInt(o.chat_system_tokens_min, o.chat_system_tokens_max));
  struct Turn {
    int32_t user = 0, reply = 0;
  };
  struct Conversation {
    uint64_t id = 0;
    int32_t num_turns = 0;
    std::vector<Turn> turns;  // so far
  };
  std::vector<Conversation> slots(static_cast<size_t>(o.chat_conversations));
  uint64_t next_conversation = 1;
  for (TraceRequest& r : trace) {
    Conversation& c = slots[static_cast<size_t>(rng.NextInt(0, o.chat_conversations - 1))];
    if (c.id == 0 || static_cast<int32_t>(c.turns.size()) == c.num_turns) {
      c = Conversation{next_conversation++, static_cast<int32_t>(rng.NextInt(o.chat_turns_min, o.chat_turns_max)), {}};
    }
    Turn turn{static_cast<int32_t>(rng.NextInt(o.chat_user_tokens_min, o.chat_user_tokens_max)),
              static_cast<int32_t>(rng.NextInt(o.min_new_tokens, o.max_new_tokens))};
    c.turns.push_back(turn);
    r.segments.clear();
    if (system_tokens > 0) r.segments.push_back({kSystemKey, system_tokens});
    for (size_t t = 0; t < c.turns.size(); ++t) {
      const uint64_t base = (c.id << 20) + (static_cast<uint64_t>(t) << 2);
      r.segments.push_back({base + 2, c.turns[t].user});
      if (t + 1 < c.turns.size()) r.segments.push_back({base + 3, c.turns[t].reply});
    }
    r.num_prompt_tokens = 0;
    for (const auto& s : r.segments) r.num_prompt_tokens += s.num_tokens;
    r.max_new_tokens = turn.reply;
  }
  return trace;
}

absl::StatusOr<std::vector<ChatConversation>> MakeChatConversations(const LoadTraceOptions& o) {
  ORCA_RETURN_IF_ERROR(ValidateChat(o));
  if (!(o.chat_think_time_s >= 0) || !std::isfinite(o.chat_think_time_s)) {
    return absl::InvalidArgumentError(absl::StrCat("chat_think_time_s must be >= 0 (got ", o.chat_think_time_s, ")"));
  }
  // At most num_requests conversations start (each has a turn at least).
  TraceOptions arrivals;
  arrivals.seed = o.seed;
  arrivals.arrival_rate = o.arrival_rate;
  arrivals.num_requests = o.num_requests;
  ORCA_ASSIGN_OR_RETURN(std::vector<TraceRequest> starts, GeneratePoissonTrace(arrivals));
  SplitMix64 rng(o.seed * 0x2545f4914f6cdd1dULL + 0x10c7);
  constexpr uint64_t kSystemKey = 1;
  const auto system_tokens = static_cast<int32_t>(rng.NextInt(o.chat_system_tokens_min, o.chat_system_tokens_max));
  std::vector<ChatConversation> conversations;
  int32_t turns_left = o.num_requests;
  for (size_t c = 0; c < starts.size() && turns_left > 0; ++c) {
    ChatConversation conversation;
    conversation.arrival = starts[c].arrival;
    conversation.system = {kSystemKey, system_tokens};
    const auto num_turns = std::min(turns_left, static_cast<int32_t>(rng.NextInt(o.chat_turns_min, o.chat_turns_max)));
    for (int32_t t = 0; t < num_turns; ++t) {
      // Keys as the open-loop trace's user messages: unique per conversation and turn.
      const uint64_t key = (static_cast<uint64_t>(c + 1) << 20) + (static_cast<uint64_t>(t) << 2) + 2;
      ChatTurn turn;
      turn.user = {key, static_cast<int32_t>(rng.NextInt(o.chat_user_tokens_min, o.chat_user_tokens_max))};
      turn.max_new_tokens = static_cast<int32_t>(rng.NextInt(o.min_new_tokens, o.max_new_tokens));
      conversation.turns.push_back(turn);
    }
    turns_left -= num_turns;
    conversations.push_back(std::move(conversation));
  }
  return conversations;
}

TraceOptions PoissonTraceOptions(const LoadTraceOptions& options) {
  TraceOptions poisson;
  poisson.seed = options.seed;
  poisson.arrival_rate = options.arrival_rate;
  poisson.num_requests = options.num_requests;
  if (ParseTraceKind(options.trace) == TraceKind::kHomogeneous) {
    // A degenerate uniform distribution: same arrival stream as the paper trace.
    poisson.min_prompt_tokens = poisson.max_prompt_tokens = options.prompt_tokens;
    poisson.min_new_tokens = poisson.max_new_tokens = options.output_tokens;
  } else {
    poisson.min_prompt_tokens = options.min_prompt_tokens;
    poisson.max_prompt_tokens = options.max_prompt_tokens;
    poisson.min_new_tokens = options.min_new_tokens;
    poisson.max_new_tokens = options.max_new_tokens;
  }
  return poisson;
}

absl::StatusOr<std::vector<TraceRequest>> MakeLoadTrace(const LoadTraceOptions& options) {
  switch (ParseTraceKind(options.trace)) {
    case TraceKind::kPaper:
      ORCA_RETURN_IF_ERROR(ValidateSynthetic(options));
      return GeneratePoissonTrace(PoissonTraceOptions(options));
    case TraceKind::kHomogeneous:
      ORCA_RETURN_IF_ERROR(ValidateSynthetic(options));
      if (options.prompt_tokens < 1 || options.output_tokens < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("homogeneous trace needs prompt_tokens >= 1 and output_tokens >= 1 (got ",
                         options.prompt_tokens, ", ", options.output_tokens, ")"));
      }
      return GeneratePoissonTrace(PoissonTraceOptions(options));
    case TraceKind::kChat:
      return MakeChatTrace(options);
    case TraceKind::kFile:
      break;
  }
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_scale must be a positive number (got ", options.time_scale, ")"));
  }
  if (options.num_requests < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_requests must be >= 0 (got ", options.num_requests, ")"));
  }
  ORCA_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(options.trace));
  ORCA_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, ParseTraceText(text, options.trace));
  if (options.num_requests > 0 && trace.size() > static_cast<size_t>(options.num_requests)) {
    trace.resize(static_cast<size_t>(options.num_requests));
  }
  for (TraceRequest& r : trace) r.arrival *= options.time_scale;
  return trace;
}

absl::StatusOr<std::vector<TraceRequest>> ParseTraceText(const std::string& text, const std::string& source) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (absl::string_view& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  const absl::string_view body = absl::StripLeadingAsciiWhitespace(text);
  std::vector<Row> rows;
  if (!body.empty() && body.front() == '{') {
    ORCA_ASSIGN_OR_RETURN(rows, ParseJsonl(lines, source));
  } else {
    ORCA_ASSIGN_OR_RETURN(rows, ParseCsv(lines, source));
  }
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no requests"));
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.arrival_s < b.arrival_s; });
  const double origin = rows.front().arrival_s;
  std::vector<TraceRequest> trace;
  trace.reserve(rows.size());
  for (const Row& row : rows) {
    TraceRequest& r = trace.emplace_back();
    r.arrival = absl::Seconds(row.arrival_s - origin);
    r.num_prompt_tokens = static_cast<int32_t>(row.prompt_tokens);
    r.max_new_tokens = static_cast<int32_t>(row.max_new_tokens);
    r.segments = row.segments;
  }
  return trace;
}

std::string TraceToJsonl(const std::vector<TraceRequest>& trace) {
  std::string out;
  for (const TraceRequest& r : trace) {
    absl::StrAppend(&out, absl::StrFormat("{\"arrival_s\": %.9f, \"prompt_tokens\": %d, \"max_tokens\": %d",
                                          absl::ToDoubleSeconds(r.arrival), r.num_prompt_tokens, r.max_new_tokens));
    if (!r.segments.empty()) {
      absl::StrAppend(&out, ", \"segments\": [");
      for (size_t i = 0; i < r.segments.size(); ++i) {
        absl::StrAppend(&out, i ? ", " : "", "[", r.segments[i].key, ", ", r.segments[i].num_tokens, "]");
      }
      absl::StrAppend(&out, "]");
    }
    absl::StrAppend(&out, "}\n");
  }
  return out;
}

}  // namespace orca::loadgen
