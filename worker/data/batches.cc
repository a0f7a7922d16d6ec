#include "worker/data/batches.h"

#include <algorithm>

#include "common/path_policy.h"
#include "contracts/job_ranks.h"
#include "contracts/transformer_config.h"
#include "worker/data/dataset.h"
#include "worker/data/tokens.h"

namespace shardwise {
namespace {

// The sequences of a rank's micro-step: its B/W of the global batch, split evenly over
// the micro-steps.
struct Slice {
  int64_t global_batch;
  int rank, world, micro_steps;
  int64_t per_micro() const { return global_batch / world / micro_steps; }
  int64_t first(int64_t step, int micro) const {
    return step * global_batch + rank * (global_batch / world) + micro * per_micro();
  }
};

// `slice` as rank `rank` takes it.
Slice OfRank(Slice slice, int rank) {
  slice.rank = rank;
  return slice;
}

class MlpBatches final : public BatchSource {
 public:
  MlpBatches(std::shared_ptr<const Dataset> data, Slice slice, bool classification)
      : data_(std::move(data)), slice_(slice), classification_(classification) {}

  std::unique_ptr<BatchSource> ForRank(int rank) const override {
    return std::make_unique<MlpBatches>(data_, OfRank(slice_, rank), classification_);
  }

  absl::StatusOr<MicroBatch> Train(int64_t step, int micro) const override {
    const Dataset& data = *data_;
    const std::vector<int64_t> rows =
        SampleRows(step, slice_.global_batch, slice_.world, slice_.rank, micro, slice_.micro_steps,
                   data.num_samples);
    MicroBatch batch;
    batch.rows = static_cast<int64_t>(rows.size());
    const int64_t in = data.input_width, out = data.target_width;
    batch.inputs.resize(batch.rows * in);
    for (int64_t i = 0; i < batch.rows; ++i) {
      std::copy_n(data.x.data() + rows[i] * in, in, batch.inputs.data() + i * in);
    }
    if (classification_) {
      for (int64_t row : rows) batch.labels.push_back(data.labels[row]);
    } else {
      batch.targets.resize(batch.rows * out);
      for (int64_t i = 0; i < batch.rows; ++i) {
        std::copy_n(data.targets.data() + rows[i] * out, out, batch.targets.data() + i * out);
      }
    }
    return batch;
  }
  absl::StatusOr<MicroBatch> Validation(int64_t, int) const override { return MicroBatch(); }
  bool has_validation() const override { return false; }
  int64_t tokens_per_step() const override { return 0; }
  DataIdentity identity() const override { return {.train_count = data_->num_samples}; }

 private:
  const std::shared_ptr<const Dataset> data_;
  const Slice slice_;
  const bool classification_;
};

class TokenBatches final : public BatchSource {
 public:
  TokenBatches(std::shared_ptr<const TokenFile> train, std::shared_ptr<const TokenFile> val,
               uint64_t seed, int64_t block_size, Slice slice)
      : train_(std::move(train)),
        val_(std::move(val)),
        seed_(seed),
        block_size_(block_size),
        slice_(slice) {}

  std::unique_ptr<BatchSource> ForRank(int rank) const override {
    return std::make_unique<TokenBatches>(train_, val_, seed_, block_size_, OfRank(slice_, rank));
  }

  absl::StatusOr<MicroBatch> Train(int64_t step, int micro) const override {
    return TokenMicroBatch(*train_, seed_, slice_.first(step, micro), slice_.per_micro(),
                           block_size_);
  }
  absl::StatusOr<MicroBatch> Validation(int64_t batch, int micro) const override {
    return TokenMicroBatch(*val_, seed_, slice_.first(batch, micro), slice_.per_micro(),
                           block_size_);
  }
  bool has_validation() const override { return val_ != nullptr; }
  int64_t tokens_per_step() const override { return slice_.global_batch * block_size_; }
  DataIdentity identity() const override {
    DataIdentity identity{.train_count = train_->size(),
                          .train_fingerprint = train_->fingerprint()};
    if (val_ != nullptr) {
      identity.validation_count = val_->size();
      identity.validation_fingerprint = val_->fingerprint();
    }
    return identity;
  }

 private:
  const std::shared_ptr<const TokenFile> train_, val_;
  const uint64_t seed_;
  const int64_t block_size_;
  const Slice slice_;
};

absl::StatusOr<std::unique_ptr<BatchSource>> OpenTokens(const v1::JobSpec& spec, Slice slice) {
  const v1::TokenData& tokens = spec.data().tokens();
  const TokenModel model{ModelField(spec.model()), VocabSize(spec.model()),
                         BlockSize(spec.model())};
  auto train = TokenFile::Open("data.tokens.train_path", tokens.train_path(), tokens.format(),
                               model, kCheckedPathLinks);
  if (!train.ok()) return train.status();
  std::unique_ptr<TokenFile> val;
  if (!tokens.val_path().empty()) {
    auto opened = TokenFile::Open("data.tokens.val_path", tokens.val_path(), tokens.format(), model,
                                  kCheckedPathLinks);
    if (!opened.ok()) return opened.status();
    val = std::move(*opened);
  }
  return std::unique_ptr<BatchSource>(std::make_unique<TokenBatches>(
      std::move(*train), std::move(val), tokens.seed(), model.block_size, slice));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchSource>> OpenBatchSource(const v1::JobSpec& spec, int rank) {
  const Slice slice{spec.global_batch_size(), rank, JobRanks(spec),
                    std::max(1, spec.gradient_accumulation_steps())};
  if (spec.data().has_tokens()) return OpenTokens(spec, slice);
  auto data = LoadDataset(spec);
  if (!data.ok()) return data.status();
  return std::unique_ptr<BatchSource>(std::make_unique<MlpBatches>(
      std::make_shared<const Dataset>(std::move(*data)), slice, spec.loss() != v1::MSE));
}

}  // namespace shardwise
