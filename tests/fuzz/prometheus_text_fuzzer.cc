// A /metrics page as `orca bench` reads it from any server.
#include <cstdint>
#include <string>

#include "bench/load/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto samples = orca::bench::ParsePrometheusText(std::string(reinterpret_cast<const char*>(data), size));
  if (samples.ok()) (void)orca::bench::SumSeries(*samples, "vllm:e2e_request_latency_seconds_count");
  return 0;
}
