#include "services/operator/work_queue.h"

#include <gtest/gtest.h>

namespace orca::k8s {
namespace {

TEST(WorkQueueTest, DeduplicatesAndKeepsOrder) {
  WorkQueue q;
  absl::Notification stop;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Length(), 2u);
  std::string key;
  ASSERT_TRUE(q.Get(&stop, &key));
  EXPECT_EQ(key, "a");
  ASSERT_TRUE(q.Get(&stop, &key));
  EXPECT_EQ(key, "b");
  EXPECT_EQ(q.Length(), 0u);
}

TEST(WorkQueueTest, AKeyReAddedWhileProcessingComesBackAfterDone) {
  WorkQueue q;
  absl::Notification stop;
  std::string key;
  q.Add("a");
  ASSERT_TRUE(q.Get(&stop, &key));
  q.Add("a");                 // changed while being reconciled
  EXPECT_EQ(q.Length(), 0u);  // not handed out twice at once
  q.Done("a");
  EXPECT_EQ(q.Length(), 1u);
  ASSERT_TRUE(q.Get(&stop, &key));
  EXPECT_EQ(key, "a");
  q.Done("a");
  EXPECT_EQ(q.Length(), 0u);
}

TEST(WorkQueueTest, DelayedKeysArriveAndStopEndsGet) {
  WorkQueue q;
  absl::Notification stop;
  std::string key;
  q.AddAfter("later", absl::Milliseconds(1));
  ASSERT_TRUE(q.Get(&stop, &key));
  EXPECT_EQ(key, "later");
  q.Done("later");
  q.AddAfter("never", absl::Hours(1));
  stop.Notify();
  EXPECT_FALSE(q.Get(&stop, &key));
}

}  // namespace
}  // namespace orca::k8s
