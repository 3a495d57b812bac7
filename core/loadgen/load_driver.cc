#include "core/loadgen/load_driver.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/loadgen/completion_stream.h"
#include "core/loadgen/http_client.h"
#include "core/loadgen/progress_bar.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBodyBytes = 1024;
/// Longest sleep of the event loop: bounds how stale the progress bar and time limit get.
constexpr double kMaxPollSeconds = 0.05;

/// One request on the wire.
struct Transfer {
  size_t index = 0;
  CURL* easy = nullptr;
  std::string body;
  Clock::time_point sent;
  long http_status = 0;
  std::string error_body;
  CompletionStream stream;
  absl::Status stream_status;
};

/// Transport errors of one transfer; everything else of a run lives in LoadSession.
size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (t->http_status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->http_status);
  if (t->http_status != 200) {
    const size_t room = kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, t->error_body.size());
    t->error_body.append(data, std::min(room, bytes));
    return bytes;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t->sent).count();
  t->stream_status = t->stream.OnBytes(absl::string_view(data, bytes), elapsed);
  return t->stream_status.ok() ? bytes : 0;  // 0 aborts the transfer
}

/// One Run(): the multi handle, the transfers in flight and the records.
class LoadSession {
 public:
  LoadSession(const LoadDriverOptions& options, const std::vector<TraceRequest>& trace, std::vector<std::string> bodies)
      : options_(options),
        trace_(trace),
        bodies_(std::move(bodies)),
        progress_(options.progress_label, static_cast<int64_t>(trace.size()),
                  absl::ToDoubleSeconds(options.max_duration), options.show_progress) {}

  /// Closed-loop chat (LoadDriver::RunClosedLoop): `trace` holds every turn (arrival and
  /// max_new_tokens; only first turns' arrivals count), `bodies` the first turns' bodies.
  struct ClosedLoop {
    std::vector<int64_t> next_turn;                // flat index of the next turn, -1 after the last
    std::vector<std::vector<int32_t>> prompt_ids;  // first turns: their prompts
    std::vector<std::vector<int32_t>> user_ids;    // later turns: their new user message
    double think_s = 0;
    std::function<std::string(const std::vector<int32_t>&, int32_t)> make_body;
  };
  void SetClosedLoop(ClosedLoop closed) {
    closed_ = std::move(closed);
    for (size_t i = 0; i < trace_.size(); ++i) {
      if (!closed_->prompt_ids[i].empty()) ready_.emplace(absl::ToDoubleSeconds(trace_[i].arrival), i);
    }
  }

  ~LoadSession() {
    for (auto& t : active_) Remove(t.get());
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (headers_ != nullptr) curl_slist_free_all(headers_);
  }

  absl::StatusOr<LoadRunResult> Run() {
    EnsureCurlInitialized();
    multi_ = curl_multi_init();
    if (multi_ == nullptr) return absl::InternalError("curl_multi_init failed");
    headers_ = curl_slist_append(headers_, "Content-Type: application/json");
    headers_ = curl_slist_append(headers_, "Accept: text/event-stream");
    headers_ = curl_slist_append(headers_, "Expect:");  // no 100-continue round trip
    if (!options_.api_key.empty()) {
      headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + options_.api_key).c_str());
    }
    result_.records.resize(trace_.size());
    for (size_t i = 0; i < trace_.size(); ++i) {
      RequestRecord& r = result_.records[i];
      r.index = static_cast<int64_t>(i);
      r.scheduled_s = absl::ToDoubleSeconds(trace_[i].arrival);
      r.prompt_tokens = trace_[i].num_prompt_tokens;
      r.max_new_tokens = trace_[i].max_new_tokens;
    }
    result_.start_time = absl::Now();
    start_ = Clock::now();
    ORCA_RETURN_IF_ERROR(Loop());
    result_.run_duration_s = Elapsed();
    progress_.Update(num_ok_, num_failed_, static_cast<int64_t>(active_.size()), Elapsed());
    progress_.Finish();
    return std::move(result_);
  }

 private:
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  bool CanLaunch() const {
    const bool pending = closed_.has_value() ? !ready_.empty() : next_ < trace_.size();
    return pending && (options_.max_concurrency <= 0 || active_.size() < static_cast<size_t>(options_.max_concurrency));
  }
  /// When the next request to send is due (CanLaunch() must hold).
  double NextDue() const {
    return closed_.has_value() ? ready_.top().first : absl::ToDoubleSeconds(trace_[next_].arrival);
  }
  size_t TakeNext() {
    if (!closed_.has_value()) return next_++;
    const size_t index = ready_.top().second;
    ready_.pop();
    return index;
  }
  /// Nothing left to send: the open loop's trace is exhausted, or (closed loop) no turn is
  /// ready — a later one becomes ready only when an active request completes.
  bool NothingToSend() const { return closed_.has_value() ? ready_.empty() : next_ == trace_.size(); }

  absl::Status Loop() {
    const double limit = absl::ToDoubleSeconds(options_.max_duration);
    for (;;) {
      double now = Elapsed();
      if (now >= limit) {
        CutOff(now);
        return absl::OkStatus();
      }
      while (CanLaunch() && NextDue() <= now) {
        ORCA_RETURN_IF_ERROR(Launch(TakeNext()));
      }
      if (NothingToSend() && active_.empty()) return absl::OkStatus();
      int running = 0;
      if (CURLMcode code = curl_multi_perform(multi_, &running); code != CURLM_OK) {
        return absl::InternalError(absl::StrCat("curl_multi_perform: ", curl_multi_strerror(code)));
      }
      Reap();
      now = Elapsed();
      progress_.Update(num_ok_, num_failed_, static_cast<int64_t>(active_.size()), now);
      double wait = std::min(kMaxPollSeconds, limit - now);
      if (CanLaunch()) wait = std::min(wait, NextDue() - now);
      if (wait > 0) {
        // Round down so an arrival is never sent late by the poll's millisecond resolution.
        const int wait_ms = static_cast<int>(std::floor(wait * 1e3));
        if (CURLMcode code = curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr); code != CURLM_OK) {
          return absl::InternalError(absl::StrCat("curl_multi_poll: ", curl_multi_strerror(code)));
        }
      }
    }
  }

  absl::Status Launch(size_t index) {
    auto t = std::make_unique<Transfer>();
    t->index = index;
    t->body = std::move(bodies_[index]);
    t->easy = curl_easy_init();
    if (t->easy == nullptr) return absl::InternalError("curl_easy_init failed");
    const std::string url = JoinUrl(options_.base_url, options_.endpoint);
    curl_easy_setopt(t->easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(t->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(t->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t.get());
    if (options_.request_timeout > absl::ZeroDuration()) {
      curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
                       static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
    }
    t->sent = Clock::now();
    result_.records[index].sent_s = std::chrono::duration<double>(t->sent - start_).count();
    if (CURLMcode code = curl_multi_add_handle(multi_, t->easy); code != CURLM_OK) {
      curl_easy_cleanup(t->easy);
      return absl::InternalError(absl::StrCat("curl_multi_add_handle: ", curl_multi_strerror(code)));
    }
    active_.push_back(std::move(t));
    return absl::OkStatus();
  }

  void Reap() {
    int pending = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &pending)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      Complete(*t, msg->data.result);
      auto it = std::find_if(active_.begin(), active_.end(),
                             [t](const std::unique_ptr<Transfer>& p) { return p.get() == t; });
      Remove(t);
      active_.erase(it);
    }
  }

  void Complete(Transfer& t, CURLcode result) {
    RequestRecord& r = result_.records[t.index];
    const double elapsed = std::chrono::duration<double>(Clock::now() - t.sent).count();
    if (t.http_status == 0) curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.http_status);
    r.http_status = static_cast<int>(t.http_status);
    const absl::Status finished = t.stream.Finish(elapsed, &r);
    absl::Status error;
    if (!t.stream_status.ok()) {
      error = t.stream_status;
    } else if (result != CURLE_OK) {
      error = absl::UnavailableError(curl_easy_strerror(result));
    } else if (t.http_status != 200) {
      error = absl::UnavailableError(absl::StrCat("HTTP ", t.http_status, ": ", t.error_body));
    } else {
      error = finished;
    }
    if (error.ok()) {
      r.outcome = RequestOutcome::kOk;
      ++num_ok_;
    } else {
      r.outcome = RequestOutcome::kFailed;
      r.error = std::string(error.message());
      ++num_failed_;
    }
    if (closed_.has_value()) FollowUp(t.index, elapsed);
  }

  /// Closed loop: the conversation's next turn, `think_s` after this one completed.
  void FollowUp(size_t index, double elapsed) {
    const int64_t next = closed_->next_turn[index];
    if (next < 0) return;
    const RequestRecord& r = result_.records[index];
    RequestRecord& n = result_.records[static_cast<size_t>(next)];
    if (r.outcome != RequestOutcome::kOk) {
      n.error = absl::StrCat("not sent: turn ", index, " of its conversation failed");
      return;
    }
    if (!r.token_ids_reported) {
      n.error =
          absl::StrCat("not sent: turn ", index, " came back without token_ids (the server ignores return_token_ids)");
      return;
    }
    std::vector<int32_t> prompt = std::move(closed_->prompt_ids[index]);
    prompt.insert(prompt.end(), r.output_token_ids.begin(), r.output_token_ids.end());
    const std::vector<int32_t>& user = closed_->user_ids[static_cast<size_t>(next)];
    prompt.insert(prompt.end(), user.begin(), user.end());
    n.prompt_tokens = static_cast<int32_t>(prompt.size());
    n.scheduled_s = r.sent_s + elapsed + closed_->think_s;
    bodies_[static_cast<size_t>(next)] = closed_->make_body(prompt, trace_[static_cast<size_t>(next)].max_new_tokens);
    closed_->prompt_ids[static_cast<size_t>(next)] = std::move(prompt);
    ready_.emplace(n.scheduled_s, static_cast<size_t>(next));
  }

  /// The time limit: close every stream still open.
  void CutOff(double now) {
    for (auto& t : active_) {
      RequestRecord& r = result_.records[t->index];
      (void)t->stream.Finish(now - r.sent_s, &r);
      r.outcome = RequestOutcome::kUnfinished;
      r.error = "cut off by the run's time limit";
      Remove(t.get());
    }
    active_.clear();
  }

  void Remove(Transfer* t) {
    if (t->easy == nullptr) return;
    curl_multi_remove_handle(multi_, t->easy);
    curl_easy_cleanup(t->easy);
    t->easy = nullptr;
  }

  const LoadDriverOptions& options_;
  const std::vector<TraceRequest>& trace_;
  std::vector<std::string> bodies_;
  ProgressBar progress_;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::vector<std::unique_ptr<Transfer>> active_;
  size_t next_ = 0;
  std::optional<ClosedLoop> closed_;
  // Closed loop: turns ready to send, by due time (then index).
  std::priority_queue<std::pair<double, size_t>, std::vector<std::pair<double, size_t>>, std::greater<>> ready_;
  int64_t num_ok_ = 0;
  int64_t num_failed_ = 0;
  Clock::time_point start_;
  LoadRunResult result_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LoadDriver>> LoadDriver::Create(LoadDriverOptions options, PromptBuilder prompts) {
  if (options.base_url.rfind("http://", 0) != 0 && options.base_url.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("url must start with http:// or https:// (got '", options.base_url, "')"));
  }
  if (options.model.empty()) return absl::InvalidArgumentError("model must not be empty");
  if (options.top_p.has_value() && !(*options.top_p > 0 && *options.top_p <= 1))
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1] (got ", *options.top_p, ")"));
  if (options.max_duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_duration must be > 0");
  }
  if (options.max_concurrency < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_concurrency must be >= 0 (got ", options.max_concurrency, ")"));
  }
  if (options.request_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("request_timeout must be >= 0");
  }
  return std::unique_ptr<LoadDriver>(new LoadDriver(std::move(options), std::move(prompts)));
}

LoadDriver::~LoadDriver() = default;

std::string LoadDriver::RequestBody(int64_t index, const TraceRequest& request) const {
  return RequestBody(
      request.segments.empty() ? prompts_.Build(index, request.num_prompt_tokens) : prompts_.Build(request.segments),
      request.max_new_tokens, /*return_token_ids=*/false);
}

std::string LoadDriver::RequestBody(const std::vector<int32_t>& prompt_ids, int32_t max_new_tokens,
                                    bool return_token_ids) const {
  json body = {
      {"model", options_.model},
      {"prompt", prompt_ids},
      {"max_tokens", max_new_tokens},
      {"stream", true},
  };
  if (return_token_ids) body["return_token_ids"] = true;
  if (options_.ignore_eos) body["ignore_eos"] = true;
  if (options_.include_usage) body["stream_options"] = {{"include_usage", true}};
  if (options_.logprobs) body["logprobs"] = 0;
  if (options_.temperature.has_value()) body["temperature"] = *options_.temperature;
  if (options_.top_p.has_value()) body["top_p"] = *options_.top_p;
  // Replace rather than throw on invalid UTF-8 (a model name from the command line).
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<LoadRunResult> LoadDriver::Run(const std::vector<TraceRequest>& trace) {
  // Bodies are built up front so that sending a request costs no JSON work on the clock.
  std::vector<std::string> bodies;
  bodies.reserve(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    bodies.push_back(RequestBody(static_cast<int64_t>(i), trace[i]));
  }
  LoadSession session(options_, trace, std::move(bodies));
  return session.Run();
}

absl::StatusOr<LoadRunResult> LoadDriver::RunClosedLoop(const std::vector<ChatConversation>& conversations,
                                                        absl::Duration think_time) {
  if (think_time < absl::ZeroDuration()) return absl::InvalidArgumentError("think_time must be >= 0");
  std::vector<TraceRequest> turns;
  std::vector<std::string> bodies;
  LoadSession::ClosedLoop closed;
  closed.think_s = absl::ToDoubleSeconds(think_time);
  for (const ChatConversation& c : conversations) {
    for (size_t t = 0; t < c.turns.size(); ++t) {
      TraceRequest r;
      r.arrival = c.arrival;
      r.max_new_tokens = c.turns[t].max_new_tokens;
      std::vector<int32_t> first;
      if (t == 0) {
        std::vector<PromptSegment> segments;
        if (c.system.num_tokens > 0) segments.push_back(c.system);
        segments.push_back(c.turns[0].user);
        first = prompts_.Build(segments);
        r.num_prompt_tokens = static_cast<int32_t>(first.size());
        bodies.push_back(RequestBody(first, r.max_new_tokens, /*return_token_ids=*/true));
        closed.user_ids.emplace_back();
      } else {
        bodies.emplace_back();  // built when the previous turn completes
        closed.user_ids.push_back(prompts_.Build({c.turns[t].user}));
      }
      closed.prompt_ids.push_back(std::move(first));
      closed.next_turn.push_back(t + 1 < c.turns.size() ? static_cast<int64_t>(turns.size()) + 1 : -1);
      turns.push_back(r);
    }
  }
  closed.make_body = [this](const std::vector<int32_t>& prompt, int32_t max_new_tokens) {
    return RequestBody(prompt, max_new_tokens, /*return_token_ids=*/true);
  };
  LoadSession session(options_, turns, std::move(bodies));
  session.SetClosedLoop(std::move(closed));
  return session.Run();
}

}  // namespace orca::loadgen
