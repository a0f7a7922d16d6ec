// A rank whose attempt fails aborts its accelerator's collectives before its model's
// threads end (RankDevice::AbortCollectives): collectives in flight toward a lost peer
// would otherwise hold the teardown until their deadline. A run that succeeds aborts
// nothing. The ranks run on the stream-ordering checker's devices (as a CUDA job's).

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "worker/testing/async_cpu_rank_device.h"
#include "worker/testing/threaded_training.h"

namespace shardwise {
namespace {

// Each rank's abort reasons.
struct AbortLog {
  absl::Mutex mu;
  std::map<int, std::vector<std::string>> reasons ABSL_GUARDED_BY(mu);
};

// A rank's device as the checker makes it, recording the aborts it is asked for.
class AbortRecordingRankDevice final : public RankDevice {
 public:
  AbortRecordingRankDevice(std::unique_ptr<RankDevice> inner, int rank,
                           std::shared_ptr<AbortLog> log)
      : rank_(rank), log_(std::move(log)) {
    device = std::move(inner->device);
    shard = inner->shard;
    replicate = inner->replicate;
    unshard = inner->unshard;
    owned = std::move(inner->owned);
  }
  void AbortCollectives(const std::string& reason) override {
    absl::MutexLock lock(&log_->mu);
    log_->reasons[rank_].push_back(reason);
  }

 private:
  const int rank_;
  const std::shared_ptr<AbortLog> log_;
};

RankDeviceFactory RecordingAborts(const std::shared_ptr<AbortLog>& log) {
  return [inner = testing::AsyncCpuRankDevices(testing::StreamTiming{}),
          log](const RankDeviceRequest& request) -> absl::StatusOr<std::unique_ptr<RankDevice>> {
    absl::StatusOr<std::unique_ptr<RankDevice>> made = inner(request);
    if (!made.ok()) return made.status();
    return std::make_unique<AbortRecordingRankDevice>(*std::move(made), request.rank, log);
  };
}

v1::JobSpec MlpJob() {
  v1::JobSpec spec;
  for (int width : {12, 32, 8}) spec.mutable_model()->add_layer_widths(width);
  spec.mutable_wrap()->set_layers_per_unit(1);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.05);
  spec.mutable_data()->mutable_synthetic()->set_seed(5);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(128);
  spec.set_global_batch_size(8);
  spec.set_steps(6);
  spec.set_world_size(2);
  spec.set_device(v1::CUDA);
  return spec;
}

TEST(FailureTeardown, AFailedAttemptAbortsItsAcceleratorsCollectives) {
  auto log = std::make_shared<AbortLog>();
  testing::ThreadedOptions options;
  options.make_device = RecordingAborts(log);
  // Rank 1's inputs at step 2 make the step's loss infinite: every rank fails there.
  options.faults = [](int rank) {
    TrainingFaults faults;
    if (rank == 1) {
      faults.corrupt_inputs = [](int64_t step, int, MicroBatch* batch) {
        if (step == 2) batch->inputs[0] = std::numeric_limits<float>::infinity();
      };
    }
    return faults;
  };
  const auto run = testing::TrainInThreads(MlpJob(), options);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("training diverged"), std::string::npos) << run.status();
  absl::MutexLock lock(&log->mu);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    ASSERT_EQ(log->reasons[rank].size(), 1u);
    EXPECT_NE(log->reasons[rank][0].find("the rank failed: FAILED_PRECONDITION: training "
                                         "diverged: the loss of step 2"),
              std::string::npos)
        << log->reasons[rank][0];
  }
}

TEST(FailureTeardown, ASuccessfulRunAbortsNothing) {
  auto log = std::make_shared<AbortLog>();
  testing::ThreadedOptions options;
  options.make_device = RecordingAborts(log);
  const auto run = testing::TrainInThreads(MlpJob(), options);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::MutexLock lock(&log->mu);
  EXPECT_TRUE(log->reasons.empty());
}

}  // namespace
}  // namespace shardwise
