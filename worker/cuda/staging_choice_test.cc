#include "worker/cuda/staging_choice.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardwise::cuda {
namespace {

using Kind = StagingChoice::Kind;

TEST(StagingChoice, CapacitiesArePowersOfTwoFromTheMinimum) {
  EXPECT_EQ(StagingCapacity(1), kMinStagingBytes);
  EXPECT_EQ(StagingCapacity(kMinStagingBytes), kMinStagingBytes);
  EXPECT_EQ(StagingCapacity(kMinStagingBytes + 1), 2 * kMinStagingBytes);
  EXPECT_EQ(StagingCapacity(kMaxStagedBytes), kMaxStagedBytes);
}

TEST(StagingChoice, LargeUploadsAreNotStaged) {
  EXPECT_EQ(ChooseStagingBlock({}, kMaxStagedBytes + 1).kind, Kind::kUnstaged);
  EXPECT_EQ(ChooseStagingBlock({}, kMaxStagedBytes).kind, Kind::kAllocate);
}

TEST(StagingChoice, TheSmallestFreeBlockThatHoldsTheUploadIsReused) {
  const std::vector<StagingBlockState> blocks = {
      {4 * kMinStagingBytes, false, 1},
      {kMinStagingBytes, true, 2},  // busy
      {2 * kMinStagingBytes, false, 3},
      {kMinStagingBytes, false, 4},  // too small for the upload below
  };
  const StagingChoice choice = ChooseStagingBlock(blocks, kMinStagingBytes + 1);
  EXPECT_EQ(choice.kind, Kind::kReuse);
  EXPECT_EQ(choice.index, 2u);
  EXPECT_EQ(ChooseStagingBlock(blocks, 10).index, 3u);
}

TEST(StagingChoice, ANewBlockWhileThereAreFewerThanTheMost) {
  const std::vector<StagingBlockState> blocks = {{kMinStagingBytes, true, 1}};
  const StagingChoice choice = ChooseStagingBlock(blocks, 3 * kMinStagingBytes);
  EXPECT_EQ(choice.kind, Kind::kAllocate);
  EXPECT_EQ(choice.index, 1u);
  EXPECT_EQ(choice.capacity, 4 * kMinStagingBytes);
}

TEST(StagingChoice, AtTheMostAFreeBlockTooSmallIsGrown) {
  std::vector<StagingBlockState> blocks(kMaxStagingBlocks, {kMinStagingBytes, true, 0});
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].last_use = 10 + i;
  blocks[5].busy = false;
  blocks[6].busy = false;
  const StagingChoice choice = ChooseStagingBlock(blocks, 2 * kMinStagingBytes);
  EXPECT_EQ(choice.kind, Kind::kReplace);
  EXPECT_EQ(choice.index, 5u);  // the less recently used of the two free ones
  EXPECT_EQ(choice.capacity, 2 * kMinStagingBytes);
}

TEST(StagingChoice, WithEveryBlockBusyTheLeastRecentlyUsedIsWaitedFor) {
  std::vector<StagingBlockState> blocks(kMaxStagingBlocks, {kMinStagingBytes, true, 0});
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].last_use = 100 - i;
  const StagingChoice choice = ChooseStagingBlock(blocks, 1);
  EXPECT_EQ(choice.kind, Kind::kWait);
  EXPECT_EQ(choice.index, kMaxStagingBlocks - 1);
}

}  // namespace
}  // namespace shardwise::cuda
