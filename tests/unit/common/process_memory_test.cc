#include "core/common/process_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "nlohmann/json.hpp"

namespace orca {
namespace {

constexpr const char* kStatus =
    "Name:\torca-scheduler\n"
    "Threads:\t7\n"
    "VmPeak:\t  900000 kB\n"
    "VmHWM:\t   40000 kB\n"
    "VmRSS:\t   30000 kB\n"
    "RssAnon:\t   12000 kB\n"
    "RssFile:\t   17000 kB\n"
    "RssShmem:\t    1000 kB\n";

TEST(ProcessMemoryTest, ParsesTheResidentSetSplitInBytes) {
  absl::StatusOr<ProcessMemory> m = ParseProcStatus(kStatus);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rss_bytes, 30000 * 1024);
  EXPECT_EQ(m->peak_rss_bytes, 40000 * 1024);
  EXPECT_EQ(m->rss_anon_bytes, 12000 * 1024);
  EXPECT_EQ(m->rss_file_bytes, 17000 * 1024);
  EXPECT_EQ(m->rss_shmem_bytes, 1000 * 1024);
  EXPECT_EQ(m->num_threads, 7);
  const nlohmann::json j = nlohmann::json::parse(m->ToJson());
  EXPECT_EQ(j["rss_bytes"], 30000 * 1024);
  EXPECT_EQ(j["peak_rss_bytes"], 40000 * 1024);
  EXPECT_EQ(j["rss_anon_bytes"], 12000 * 1024);
  EXPECT_EQ(j["rss_file_bytes"], 17000 * 1024);
  EXPECT_EQ(j["threads"], 7);
}

TEST(ProcessMemoryTest, RejectsMissingOrMalformedFieldsByName) {
  EXPECT_FALSE(ParseProcStatus("Name:\tx\nThreads:\t1\n").ok());
  absl::StatusOr<ProcessMemory> bad = ParseProcStatus("VmRSS:\t12 MB\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("VmRSS"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseProcStatus("VmRSS:\t-5 kB\n").ok());
}

TEST(ProcessMemoryTest, SeesThisProcessGrowWhenItTouchesMemory) {
  absl::StatusOr<ProcessMemory> before = ReadProcessMemory();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->rss_bytes, 0);
  EXPECT_GE(before->peak_rss_bytes, before->rss_bytes);
  EXPECT_GE(before->num_threads, 1);
  constexpr size_t kBytes = 64 << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);  // resident now
  absl::StatusOr<ProcessMemory> after = ReadProcessMemory();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->rss_anon_bytes, before->rss_anon_bytes + static_cast<int64_t>(kBytes) / 2);
  EXPECT_GE(after->peak_rss_bytes, after->rss_bytes);
  EXPECT_EQ(block[kBytes - 1], 1);
}

}  // namespace
}  // namespace orca
