#include "core/sched/kv_slot_budget.h"

#include <gtest/gtest.h>

namespace orca::sched {
namespace {

TEST(KvSlotBudgetTest, ReservesUpToNSlotsAndNoFurther) {
  absl::StatusOr<KvSlotBudget> budget = KvSlotBudget::Create(100, 1);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_TRUE(budget->Fits(100));
  EXPECT_FALSE(budget->Fits(101));
  EXPECT_TRUE(budget->TryReserve(60));
  EXPECT_EQ(budget->n_rsrv(), 60);
  EXPECT_FALSE(budget->TryReserve(41));  // does not fit: a return value, nothing changes
  EXPECT_EQ(budget->n_rsrv(), 60);
  EXPECT_TRUE(budget->TryReserve(40));
  EXPECT_EQ(budget->num_free(), 0);
  budget->Release(60);
  budget->Release(40);
  EXPECT_EQ(budget->n_rsrv(), 0);
}

TEST(KvSlotBudgetTest, RoundsReservationsUpToWholeBlocks) {
  absl::StatusOr<KvSlotBudget> budget = KvSlotBudget::Create(64, 16);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->ReservationFor(1), 16);
  EXPECT_EQ(budget->ReservationFor(16), 16);
  EXPECT_EQ(budget->ReservationFor(17), 32);
  EXPECT_EQ(budget->ReservationFor(64), 64);
}

TEST(KvSlotBudgetTest, RejectsBadConfigurationNamingTheValue) {
  EXPECT_EQ(KvSlotBudget::Create(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvSlotBudget::Create(64, 0).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status status = KvSlotBudget::Create(100, 16).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("n_slots (100) must be a multiple of kv_block_size (16)"),
            std::string::npos)
      << status;
}

TEST(KvSlotBudgetDeathTest, ReleasingMoreThanReservedIsABug) {
  absl::StatusOr<KvSlotBudget> budget = KvSlotBudget::Create(10, 1);
  ASSERT_TRUE(budget.ok());
  EXPECT_DEATH(budget->Release(1), "releasing 1 KV slots");
}

}  // namespace
}  // namespace orca::sched
