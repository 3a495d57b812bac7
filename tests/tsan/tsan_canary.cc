// Proof that scripts/tsan.sh's build and options see races at all, and see the
// synchronization Orca relies on. Not a CTest test: scripts/tsan.sh runs every mode before
// the tests and checks the outcome each one names (a report ends the process with 66).
//
//   race        two threads write one int, unsynchronized: must be reported.
//   grpc-race   the same, one write from a gRPC callback thread (a grpc::Alarm): must be
//               reported (ignore_noninstrumented_modules must not hide Orca code that gRPC
//               calls).
//   mutex       the writes under an absl::Mutex: no report. With Debian's uninstrumented
//               Abseil this one reports a race (absl::Mutex invisible to TSan).
//   grpc-mutex  gRPC callback thread and main thread, both under the absl::Mutex: no report.
//   omp         an OpenMP loop's results read after the loop: no report (libomp's barrier is
//               visible only through Archer, libomp's TSan tool, which must be loaded).
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

int counter = 0;  // the shared state, deliberately unguarded in the *race modes
absl::Mutex mu;

void Race() {
  std::thread t([] { ++counter; });
  ++counter;
  t.join();
}

void Guarded() {
  std::thread t([] {
    absl::MutexLock lock(&mu);
    ++counter;
  });
  {
    absl::MutexLock lock(&mu);
    ++counter;
  }
  t.join();
}

// One write on a gRPC callback thread (after 10 ms), one on this thread 200 ms after arming
// the alarm, with nothing in between that synchronizes: no order between the two unless
// `guarded` takes the mutex around both. (Writing right after Set() gave a report in only
// some runs: this thread's wait on `fired` can order it before the callback.)
void FromGrpcThread(bool guarded) {
  grpc::Alarm alarm;
  absl::Notification fired;
  alarm.Set(std::chrono::system_clock::now() + std::chrono::milliseconds(10), [&, guarded](bool) {
    if (guarded) {
      absl::MutexLock lock(&mu);
      ++counter;
    } else {
      ++counter;
    }
    fired.Notify();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (guarded) {
    absl::MutexLock lock(&mu);
    ++counter;
  } else {
    ++counter;
  }
  fired.WaitForNotification();
}

void OpenMp() {
  std::vector<float> values(1 << 16);
  for (int round = 0; round < 3; ++round) {
#pragma omp parallel for
    for (int i = 0; i < static_cast<int>(values.size()); ++i) values[i] += 0.5f * i;
  }
  double sum = 0;
  for (float v : values) sum += v;
  counter = static_cast<int>(sum > 0);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc == 2 ? argv[1] : "";
  if (std::strcmp(mode, "race") == 0) {
    Race();
  } else if (std::strcmp(mode, "mutex") == 0) {
    Guarded();
  } else if (std::strcmp(mode, "grpc-race") == 0) {
    FromGrpcThread(/*guarded=*/false);
  } else if (std::strcmp(mode, "grpc-mutex") == 0) {
    FromGrpcThread(/*guarded=*/true);
  } else if (std::strcmp(mode, "omp") == 0) {
    OpenMp();
  } else {
    std::fprintf(stderr, "usage: %s race|grpc-race|mutex|grpc-mutex|omp\n", argv[0]);
    return 2;
  }
  std::printf("%s: counter=%d\n", mode, counter);
  return 0;
}
