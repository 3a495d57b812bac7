// /health latency under CPU-heavy load (issue 45): K clients post large
// /tokenize bodies (4 MB by default) back to back while a prober opens a new
// connection every --probe-interval-ms and times GET /health (connect, request,
// full response), as a Kubernetes liveness probe does. Prints the probe latency
// percentiles, the /tokenize calls done and refused (503), and the CPU used.
//
// Everything runs in this process on 127.0.0.1: the gateway (byte-level model,
// 2 HTTP I/O threads, its CPU pool) in front of a FakeScheduler. The numbers
// compare builds on one machine; they are not absolute capacity.
//
//   health_bench --clients 8 --body-bytes 4194304 --seconds 20 --probe-interval-ms 20
//
// Uses only Gateway options that predate the CPU pool, so the same file builds
// against an older checkout for a before/after comparison (bench/README.md).

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/text/chat_template.h"
#include "core/text/tokenizer.h"
#include "services/gateway/gateway.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/testing/byte_level_model.h"
#include "services/gateway/testing/fake_scheduler.h"

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using orca::gateway::Gateway;
using orca::gateway::GatewayModel;
using orca::gateway::testing::FakeScheduler;

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// One request on an open connection; the status code, or -1 on an I/O error.
// Reads the response's head and its Content-Length body.
int Exchange(tcp::socket& socket, const std::string& request) {
  boost::system::error_code ec;
  net::write(socket, net::buffer(request), ec);
  if (ec) return -1;
  net::streambuf buffer;
  const size_t head_end = net::read_until(socket, buffer, "\r\n\r\n", ec);
  if (ec) return -1;
  std::string head(net::buffers_begin(buffer.data()), net::buffers_begin(buffer.data()) + head_end);
  buffer.consume(head_end);
  int status = -1;
  if (head.size() > 12) status = std::atoi(head.c_str() + 9);
  size_t length = 0;
  for (const char* name : {"Content-Length: ", "content-length: "}) {
    const size_t at = head.find(name);
    if (at != std::string::npos) length = std::stoul(head.substr(at + std::string(name).size()));
  }
  if (length > buffer.size()) net::read(socket, buffer, net::transfer_exactly(length - buffer.size()), ec);
  return ec ? -1 : status;
}

tcp::socket Connect(net::io_context& io, int port) {
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  return socket;
}

int Main(int argc, char** argv) {
  int64_t clients = 8;
  int64_t body_bytes = 4 << 20;
  double seconds = 20;
  int64_t probe_interval_ms = 20;
  orca::FlagSet flags("health_bench", "/health latency while clients post large /tokenize bodies (issue 45)");
  flags.AddInt("clients", &clients, "concurrent /tokenize clients, each posting back to back");
  flags.AddInt("body-bytes", &body_bytes, "size of each /tokenize body (the gateway's --max-body-bytes is set to fit)");
  flags.AddDouble("seconds", &seconds, "how long the load runs");
  flags.AddInt("probe-interval-ms", &probe_interval_ms, "pause between /health probes (a new connection each)");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  orca::SetLogLevel(orca::LogLevel::kWarning);

  FakeScheduler::Options scheduler_options;
  scheduler_options.vocab_size = orca::gateway::testing::kByteLevelVocabSize;
  scheduler_options.eos_id = orca::gateway::testing::kByteLevelEosId;
  auto scheduler = FakeScheduler::Start(scheduler_options);
  if (!scheduler.ok()) {
    std::cerr << scheduler.status() << "\n";
    return 1;
  }
  auto tokenizer = orca::text::Tokenizer::FromJson(orca::gateway::testing::ByteLevelTokenizerJson(),
                                                   orca::gateway::testing::ByteLevelTokenizerConfigJson());
  auto chat_template = orca::text::ChatTemplate::Builtin("chatml");
  if (!tokenizer.ok() || !chat_template.ok()) return 1;
  Gateway::Options options;
  options.listen = "127.0.0.1:0";
  options.grpc_listen = "";
  options.schedulers = {(*scheduler)->address()};
  options.max_body_bytes = body_bytes + 4096;
  options.scheduler_poll_interval = absl::Milliseconds(100);
  auto gateway = Gateway::CreateWithModel(options, GatewayModel::FromParts("byte-model", std::move(tokenizer).value(),
                                                                           std::move(chat_template).value(), 1 << 20));
  if (!gateway.ok()) {
    std::cerr << gateway.status() << "\n";
    return 1;
  }
  const int port = (*gateway)->http_port();
  (*gateway)->WaitUntilReady(absl::Seconds(10));

  // A JSON body of `body_bytes` whose prompt is ASCII words (the byte-level tokenizer's worst case is the same).
  std::string prompt;
  prompt.reserve(static_cast<size_t>(body_bytes));
  while (static_cast<int64_t>(prompt.size()) < body_bytes - 32) prompt += "lorem ipsum dolor sit amet ";
  const std::string body = absl::StrCat(R"({"prompt": ")", prompt, R"("})");
  const std::string tokenize = absl::StrCat(
      "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: ",
      body.size(), "\r\n\r\n", body);
  const std::string health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

  // Unloaded baseline first.
  auto probe = [&](std::vector<double>* latencies, int* failures, const std::atomic<bool>& stop, double limit) {
    net::io_context io;
    const Clock::time_point end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
    while (!stop && Clock::now() < end) {
      const Clock::time_point start = Clock::now();
      tcp::socket socket = Connect(io, port);
      const int status = Exchange(socket, health);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (status == 200) {
        latencies->push_back(ms);
      } else {
        ++*failures;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(probe_interval_ms));
    }
  };
  std::vector<double> idle_ms;
  int idle_failures = 0;
  std::atomic<bool> never{false};
  probe(&idle_ms, &idle_failures, never, 2.0);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, refused{0}, errors{0};
  const double cpu_start = CpuSeconds();
  const Clock::time_point load_start = Clock::now();
  std::vector<std::thread> load;
  for (int64_t c = 0; c < clients; ++c) {
    load.emplace_back([&] {
      net::io_context io;
      tcp::socket socket = Connect(io, port);
      while (!stop) {
        const int status = Exchange(socket, tokenize);
        if (status == 200) {
          ++done;
        } else if (status == 503) {
          ++refused;
        } else {
          ++errors;
          socket = Connect(io, port);
        }
      }
    });
  }
  std::vector<double> loaded_ms;
  int loaded_failures = 0;
  probe(&loaded_ms, &loaded_failures, stop, seconds);
  stop = true;
  for (std::thread& t : load) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - load_start).count();
  const double cpu = CpuSeconds() - cpu_start;

  std::printf(
      "health_bench: %lld clients x %lld-byte /tokenize bodies, %.1f s, probe every %lld ms, %u hardware threads\n",
      static_cast<long long>(clients), static_cast<long long>(body_bytes), wall,
      static_cast<long long>(probe_interval_ms), std::thread::hardware_concurrency());
  std::printf("  /health idle:   n=%zu p50 %.2f ms  p99 %.2f ms  max %.2f ms  failed %d\n", idle_ms.size(),
              Percentile(idle_ms, 0.5), Percentile(idle_ms, 0.99), Percentile(idle_ms, 1.0), idle_failures);
  std::printf("  /health loaded: n=%zu p50 %.2f ms  p99 %.2f ms  max %.2f ms  failed %d\n", loaded_ms.size(),
              Percentile(loaded_ms, 0.5), Percentile(loaded_ms, 0.99), Percentile(loaded_ms, 1.0), loaded_failures);
  std::printf("  /tokenize: %lld done (%.2f/s), %lld refused 503, %lld errors; process CPU %.1f s (%.2f cores)\n",
              static_cast<long long>(done.load()), static_cast<double>(done.load()) / wall,
              static_cast<long long>(refused.load()), static_cast<long long>(errors.load()), cpu, cpu / wall);
  (*gateway)->Shutdown(absl::Seconds(1));
  (*scheduler)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
