// Gateway benchmark (loopback only, bounded in requests and time):
//
//  1. Overhead per streamed token: the same N-token generation read directly
//     from a FakeScheduler over gRPC, and through the gateway as an SSE
//     stream (/v1/completions, stream: true). The difference per token is
//     what the gateway adds: HTTP, detokenization, stop matching, JSON, SSE.
//  2. Concurrent streams held: K SSE streams opened at once against a slow
//     scheduler (one token per stream every --stream-interval-ms); counts the
//     streams established and still receiving tokens after --hold-seconds.
//
// Everything runs in this process (gateway on 2 I/O threads); the numbers are
// for comparing builds on one machine, not absolute capacity.
//
//   gateway_bench --tokens 2000 --repeats 5 --streams 2000 --hold-seconds 5

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "orca/v1/scheduler.grpc.pb.h"
#include "services/gateway/gateway.h"
#include "services/gateway/scheduler_call.h"
#include "services/gateway/scheduler_router.h"
#include "services/gateway/testing/byte_level_model.h"
#include "services/gateway/testing/fake_scheduler.h"

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using orca::gateway::Gateway;
using orca::gateway::testing::FakeScheduler;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// User + system CPU seconds of this process so far.
double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

long RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

std::string CompletionRequest(int port, int max_new_tokens) {
  const std::string body = absl::StrCat(R"({"prompt": "bench", "max_tokens": )", max_new_tokens,
                                        R"(, "temperature": 0, "ignore_eos": true, "stream": true})");
  return absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:", port,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
}

// Counts one call's tokens and signals the end.
class CountingListener : public orca::gateway::SchedulerCallListener {
 public:
  void OnSchedulerResponse(int, const orca::v1::GenerateResponse& response) override {
    tokens_ += response.tokens_size();
  }
  void OnSchedulerDone(int, const grpc::Status& status) override {
    ok_ = status.ok();
    done_.Notify();
  }
  int Wait() {
    done_.WaitForNotification();
    return ok_ ? tokens_ : -1;
  }

 private:
  int tokens_ = 0;  // OnSchedulerResponse calls of one call never overlap
  bool ok_ = false;
  absl::Notification done_;
};

// Seconds to stream `tokens` tokens straight from the scheduler with the same
// callback-API client the gateway uses (SchedulerCall), discarding them: the
// baseline without HTTP, detokenization, stop matching, JSON and SSE.
double DirectSeconds(orca::gateway::SchedulerRouter& router, int tokens) {
  orca::v1::GenerateRequest request;
  for (char c : std::string("bench")) request.add_prompt_token_ids(static_cast<unsigned char>(c));
  request.set_max_new_tokens(tokens);
  request.set_ignore_eos(true);
  auto listener = std::make_shared<CountingListener>();
  const auto start = Clock::now();
  orca::gateway::SchedulerCall::Start(router.Acquire().value(), request, 0, listener);
  const int received = listener->Wait();
  const double seconds = Seconds(Clock::now() - start);
  if (received != tokens) std::cerr << "direct stream incomplete: " << received << "\n";
  return seconds;
}

// Seconds to stream `tokens` tokens through the gateway as SSE.
double GatewaySeconds(int port, int tokens) {
  net::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  socket.set_option(tcp::no_delay(true));
  const auto start = Clock::now();
  net::write(socket, net::buffer(CompletionRequest(port, tokens)));
  net::streambuf buffer;
  boost::system::error_code ec;
  net::read_until(socket, buffer, "data: [DONE]", ec);
  const double seconds = Seconds(Clock::now() - start);
  if (ec) std::cerr << "gateway stream incomplete: " << ec.message() << "\n";
  return seconds;
}

struct OverheadResult {
  // Wall time per token (the stream's pace: bounded by the scheduler's
  // one-write-at-a-time round trips on both paths).
  double direct_us_per_token = 0;
  double gateway_us_per_token = 0;
  // Process CPU per token (client + scheduler [+ gateway]): the difference is
  // the gateway's cost per streamed token.
  double direct_cpu_us_per_token = 0;
  double gateway_cpu_us_per_token = 0;
};

OverheadResult MeasureOverhead(int tokens, int repeats, int io_threads) {
  FakeScheduler::Options so;
  so.vocab_size = orca::gateway::testing::kByteLevelVocabSize;
  so.iteration_interval = absl::ZeroDuration();  // as fast as the stream is read
  so.max_context = tokens + 64;
  auto scheduler = FakeScheduler::Start(so);
  Gateway::Options go;
  go.listen = "127.0.0.1:0";
  go.grpc_listen = "";
  go.io_threads = io_threads;
  go.schedulers = {(*scheduler)->address()};
  go.scheduler_poll_interval = absl::Milliseconds(100);
  auto model = orca::gateway::GatewayModel::FromParts(
      "byte-model",
      orca::text::Tokenizer::FromJson(orca::gateway::testing::ByteLevelTokenizerJson(),
                                      orca::gateway::testing::ByteLevelTokenizerConfigJson())
          .value(),
      nullptr, tokens + 64);
  auto gateway = Gateway::CreateWithModel(go, std::move(model));
  if (!gateway.ok() || !(*gateway)->WaitUntilReady(absl::Seconds(10))) {
    std::cerr << "gateway did not start\n";
    std::exit(1);
  }
  orca::gateway::SchedulerRouter::Options router_options;
  router_options.addresses = {(*scheduler)->address()};
  router_options.start_polling = false;
  auto router = orca::gateway::SchedulerRouter::Create(router_options).value();
  router->PollNow();
  std::vector<double> direct, via, direct_cpu, via_cpu;
  DirectSeconds(*router, tokens / 10);  // warm up both paths
  GatewaySeconds((*gateway)->http_port(), tokens / 10);
  for (int r = 0; r < repeats; ++r) {
    double cpu = CpuSeconds();
    direct.push_back(DirectSeconds(*router, tokens));
    direct_cpu.push_back(CpuSeconds() - cpu);
    cpu = CpuSeconds();
    via.push_back(GatewaySeconds((*gateway)->http_port(), tokens));
    via_cpu.push_back(CpuSeconds() - cpu);
  }
  (*gateway)->Shutdown();
  (*scheduler)->Shutdown();
  return {Median(direct) * 1e6 / tokens, Median(via) * 1e6 / tokens, Median(direct_cpu) * 1e6 / tokens,
          Median(via_cpu) * 1e6 / tokens};
}

// One SSE client connection for the concurrency test.
struct StreamClient : std::enable_shared_from_this<StreamClient> {
  StreamClient(net::io_context& io, int port, int max_new_tokens, int* established, int* failed)
      : socket(io), request(CompletionRequest(port, max_new_tokens)), established(established), failed(failed) {}

  void Start(const tcp::endpoint& endpoint) {
    socket.async_connect(endpoint, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return self->Fail();
      net::async_write(self->socket, net::buffer(self->request),
                       [self](boost::system::error_code ec, size_t) { ec ? self->Fail() : self->Read(); });
    });
  }
  void Read() {
    socket.async_read_some(net::buffer(chunk), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
      if (ec) {
        if (!self->done) self->Fail();
        return;
      }
      const std::string_view data(self->chunk, n);
      for (size_t pos = data.find("data: {"); pos != std::string_view::npos; pos = data.find("data: {", pos + 1)) {
        ++self->events;
      }
      if (!self->open && self->events > 0) {
        self->open = true;
        ++*self->established;
      }
      if (data.find("[DONE]") != std::string_view::npos) self->done = true;
      self->Read();
    });
  }
  void Fail() {
    if (!failed_once) ++*failed;
    failed_once = true;
  }

  tcp::socket socket;
  const std::string request;
  int* established;
  int* failed;
  char chunk[4096];
  int64_t events = 0;
  bool open = false;
  bool done = false;
  bool failed_once = false;
};

struct ConcurrencyResult {
  int requested = 0;
  int established = 0;
  int failed = 0;
  int alive_after_hold = 0;
  double establish_seconds = 0;
  int64_t events = 0;
  double hold_seconds = 0;
  long rss_kb_before = 0;
  long rss_kb_held = 0;
};

ConcurrencyResult MeasureConcurrentStreams(int streams, double hold_seconds, int interval_ms, int io_threads) {
  FakeScheduler::Options so;
  so.vocab_size = orca::gateway::testing::kByteLevelVocabSize;
  so.iteration_interval = absl::Milliseconds(interval_ms);
  so.max_context = 4096;
  auto scheduler = FakeScheduler::Start(so);
  Gateway::Options go;
  go.listen = "127.0.0.1:0";
  go.grpc_listen = "";
  go.io_threads = io_threads;
  go.max_concurrent_requests = streams + 16;
  go.schedulers = {(*scheduler)->address()};
  go.scheduler_poll_interval = absl::Milliseconds(200);
  auto model = orca::gateway::GatewayModel::FromParts(
      "byte-model",
      orca::text::Tokenizer::FromJson(orca::gateway::testing::ByteLevelTokenizerJson(),
                                      orca::gateway::testing::ByteLevelTokenizerConfigJson())
          .value(),
      nullptr, 4096);
  auto gateway = Gateway::CreateWithModel(go, std::move(model));
  if (!gateway.ok() || !(*gateway)->WaitUntilReady(absl::Seconds(10))) {
    std::cerr << "gateway did not start\n";
    std::exit(1);
  }
  ConcurrencyResult result;
  result.requested = streams;
  result.rss_kb_before = RssKb();
  // Long enough to outlast the hold: the streams are cut by the client.
  const int max_new_tokens = std::min(4000, static_cast<int>(hold_seconds * 1000 / interval_ms) * 4 + 100);
  net::io_context io;
  const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>((*gateway)->http_port()));
  std::vector<std::shared_ptr<StreamClient>> clients;
  const auto start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    clients.push_back(std::make_shared<StreamClient>(io, (*gateway)->http_port(), max_new_tokens, &result.established,
                                                     &result.failed));
    clients.back()->Start(endpoint);
  }
  // Run until every stream is established (or failed), bounded.
  const auto establish_deadline = start + std::chrono::seconds(60);
  while (result.established + result.failed < streams && Clock::now() < establish_deadline) {
    io.run_for(std::chrono::milliseconds(10));
  }
  result.establish_seconds = Seconds(Clock::now() - start);
  int64_t events_at_open = 0;
  for (const auto& c : clients) events_at_open += c->events;
  const auto hold_start = Clock::now();
  io.run_for(std::chrono::milliseconds(static_cast<int64_t>(hold_seconds * 1000)));
  result.hold_seconds = Seconds(Clock::now() - hold_start);
  result.rss_kb_held = RssKb();
  for (const auto& c : clients) {
    result.events += c->events;
    if (c->open && !c->failed_once && !c->done) ++result.alive_after_hold;
  }
  result.events -= events_at_open;
  const int failed_during_run = result.failed;
  for (auto& c : clients) {
    boost::system::error_code ec;
    c->socket.close(ec);
  }
  io.run_for(std::chrono::milliseconds(200));
  result.failed = failed_during_run;  // closing them ourselves is not a failure
  (*gateway)->Shutdown();
  (*scheduler)->Shutdown();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 2000;
  int repeats = 5;
  int streams = 2000;
  double hold_seconds = 5;
  int interval_ms = 200;
  int io_threads = 2;
  orca::FlagSet flags("gateway_bench", "Gateway overhead per streamed token and concurrent SSE streams held.");
  flags.AddInt("tokens", &tokens, "tokens per stream in the overhead measurement");
  flags.AddInt("repeats", &repeats, "repetitions of the overhead measurement (median reported)");
  flags.AddInt("streams", &streams, "concurrent SSE streams to open (0 skips the test)");
  flags.AddDouble("hold-seconds", &hold_seconds, "how long to keep the streams open");
  flags.AddInt("stream-interval-ms", &interval_ms, "scheduler iteration interval in the concurrency test");
  flags.AddInt("io-threads", &io_threads, "gateway I/O threads");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || flags.help_requested()) {
    std::cout << (s.ok() ? "" : std::string(s.message()) + "\n") << flags.Usage();
    return s.ok() ? 0 : 2;
  }
  if (tokens < 10 || tokens > 100000 || repeats < 1 || repeats > 100 || streams < 0 || streams > 20000 ||
      hold_seconds < 0 || hold_seconds > 120 || interval_ms < 1) {
    std::cerr << "flags out of the bounded range\n";
    return 2;
  }
  orca::SetLogLevel(orca::LogLevel::kWarning);
  // Two sockets per stream live in this process (client and gateway side).
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  const OverheadResult overhead = MeasureOverhead(tokens, repeats, io_threads);
  std::printf("overhead: %d tokens/stream, median of %d\n", tokens, repeats);
  std::printf("                               wall us/token   CPU us/token\n");
  std::printf("  scheduler -> gRPC reader   : %10.2f   %12.2f\n", overhead.direct_us_per_token,
              overhead.direct_cpu_us_per_token);
  std::printf("  through gateway (HTTP SSE) : %10.2f   %12.2f\n", overhead.gateway_us_per_token,
              overhead.gateway_cpu_us_per_token);
  std::printf("  gateway overhead           : %10.2f   %12.2f\n",
              overhead.gateway_us_per_token - overhead.direct_us_per_token,
              overhead.gateway_cpu_us_per_token - overhead.direct_cpu_us_per_token);
  std::string json = absl::StrCat(R"({"tokens":)", tokens, R"(,"direct_us_per_token":)", overhead.direct_us_per_token,
                                  R"(,"gateway_us_per_token":)", overhead.gateway_us_per_token,
                                  R"(,"direct_cpu_us_per_token":)", overhead.direct_cpu_us_per_token,
                                  R"(,"gateway_cpu_us_per_token":)", overhead.gateway_cpu_us_per_token);
  if (streams > 0) {
    const ConcurrencyResult c = MeasureConcurrentStreams(streams, hold_seconds, interval_ms, io_threads);
    std::printf("concurrent streams: %d requested, %d established in %.2f s, %d failed\n", c.requested, c.established,
                c.establish_seconds, c.failed);
    std::printf("  still streaming after %.1f s: %d; %lld SSE events delivered during the hold (%.0f/s)\n",
                c.hold_seconds, c.alive_after_hold, static_cast<long long>(c.events),
                c.hold_seconds > 0 ? c.events / c.hold_seconds : 0.0);
    std::printf("  process RSS %ld MiB -> %ld MiB with the streams open (client + gateway + scheduler)\n",
                c.rss_kb_before / 1024, c.rss_kb_held / 1024);
    absl::StrAppend(&json, R"(,"streams_requested":)", c.requested, R"(,"streams_established":)", c.established,
                    R"(,"streams_alive_after_hold":)", c.alive_after_hold, R"(,"hold_seconds":)", c.hold_seconds,
                    R"(,"events_per_second":)", c.hold_seconds > 0 ? c.events / c.hold_seconds : 0.0,
                    R"(,"rss_kb_held":)", c.rss_kb_held);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}
