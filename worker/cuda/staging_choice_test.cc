#include "worker/cuda/staging_choice.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardwise::cuda {
namespace {

using Kind = StagingChoice::Kind;

TEST(StagingChoice, LargeUploadsAreNotStaged) {
  const std::vector<StagingBlockState> blocks(kStagingBlocks);
  EXPECT_EQ(ChooseStagingBlock(blocks, kMaxStagedBytes + 1).kind, Kind::kUnstaged);
  EXPECT_EQ(ChooseStagingBlock(blocks, kMaxStagedBytes).kind, Kind::kReuse);
}

TEST(StagingChoice, WithoutBlocksNothingIsStaged) {
  EXPECT_EQ(ChooseStagingBlock({}, 1).kind, Kind::kUnstaged);
}

TEST(StagingChoice, TheLeastRecentlyUsedFreeBlockIsReused) {
  const std::vector<StagingBlockState> blocks = {
      {false, 7}, {true, 1} /* busy, used longest ago */, {false, 3}, {false, 9}};
  const StagingChoice choice = ChooseStagingBlock(blocks, 12);
  EXPECT_EQ(choice.kind, Kind::kReuse);
  EXPECT_EQ(choice.index, 2u);
}

TEST(StagingChoice, WithEveryBlockBusyTheLeastRecentlyUsedIsWaitedFor) {
  std::vector<StagingBlockState> blocks(kStagingBlocks, {true, 0});
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i].last_use = 100 - i;
  const StagingChoice choice = ChooseStagingBlock(blocks, 1);
  EXPECT_EQ(choice.kind, Kind::kWait);
  EXPECT_EQ(choice.index, kStagingBlocks - 1);
}

}  // namespace
}  // namespace shardwise::cuda
