// DataIdentity: its packing for a collective, the fingerprint's independence of how the
// ids are chunked, and the refusal that names the file, the ranks and what differs.

#include "worker/data/data_identity.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::JobSpec TokenSpec() {
  v1::JobSpec spec;
  spec.mutable_data()->mutable_tokens()->set_train_path("/data/train.bin");
  return spec;
}

TEST(DataIdentity, PacksForACollectiveAndBack) {
  const DataIdentity identity{.train_count = 7,
                              .validation_count = 3,
                              .train_fingerprint = 0xfedcba9876543210ULL,
                              .validation_fingerprint = 1};
  const auto packed = identity.Pack();
  EXPECT_EQ(DataIdentity::Unpack(packed.data()), identity);
}

// FNV-1a over 64-bit values, a chunk at a time or whole: the same.
TEST(DataIdentity, TheFingerprintIsFnv1aWhateverTheChunks) {
  const std::vector<int64_t> ids = {5, 0, 65535, 17, 5};
  uint64_t want = kEmptyFingerprint;
  for (int64_t id : ids) want = (want ^ static_cast<uint64_t>(id)) * 0x100000001b3ULL;
  EXPECT_EQ(FingerprintIds(kEmptyFingerprint, ids.data(), ids.size()), want);
  const uint64_t first = FingerprintIds(kEmptyFingerprint, ids.data(), 2);
  EXPECT_EQ(FingerprintIds(first, ids.data() + 2, 3), want);
  std::vector<int64_t> swapped = {0, 5, 65535, 17, 5};
  EXPECT_NE(FingerprintIds(kEmptyFingerprint, swapped.data(), swapped.size()), want);
}

TEST(DataIdentity, RanksWithTheSameDataAgree) {
  const DataIdentity same{.train_count = 100, .train_fingerprint = 9};
  EXPECT_TRUE(CheckEveryRankReadTheSameData(TokenSpec(), {same, same, same}).ok());
  EXPECT_TRUE(CheckEveryRankReadTheSameData(TokenSpec(), {same}).ok());
}

TEST(DataIdentity, ARankWithAnotherCountIsNamed) {
  const DataIdentity ours{.train_count = 100, .train_fingerprint = 9};
  DataIdentity theirs = ours;
  theirs.train_count = 90;
  const absl::Status status = CheckEveryRankReadTheSameData(TokenSpec(), {ours, ours, theirs});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "the ranks opened different data: data.tokens.train_path holds 100 tokens on rank 0 "
            "and 90 on rank 2 (a file changed while the ranks opened it, or their hosts hold "
            "different copies); every rank must read the same files");
}

TEST(DataIdentity, ARankWithOtherIdsOfTheSameCountIsNamed) {
  const DataIdentity ours{.train_count = 100,
                          .validation_count = 20,
                          .train_fingerprint = 9,
                          .validation_fingerprint = 0xab};
  DataIdentity theirs = ours;
  theirs.validation_fingerprint = 0xcd;
  const absl::Status status = CheckEveryRankReadTheSameData(TokenSpec(), {ours, theirs});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("data.tokens.val_path holds 20 tokens on rank 0 and on rank "
                                  "1, but not the same ones (fingerprints 00000000000000ab and "
                                  "00000000000000cd)"),
            std::string::npos)
      << status;
}

TEST(DataIdentity, TheMlpsSamplesAreCompared) {
  v1::JobSpec spec;
  spec.mutable_data()->set_safetensors_path("/data/mlp.safetensors");
  const absl::Status status = CheckEveryRankReadTheSameData(
      spec, {DataIdentity{.train_count = 64}, DataIdentity{.train_count = 32}});
  EXPECT_NE(status.message().find("data.safetensors_path holds 64 samples on rank 0 and 32 on "
                                  "rank 1"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace shardwise
