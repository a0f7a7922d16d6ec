// Sharded checkpoints with real ranks (threads over Gloo/TCP) running the real trainer.

#include "worker/fsdp/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/permissions_apply.h"
#include "common/testing/scratch.h"
#include "contracts/checkpoint_files.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_validation.h"
#include "contracts/permanent_failure.h"
#include "contracts/safetensors.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"

namespace shardwise::fsdp {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string TempDir(const std::string& name) { return testing::FreshScratchFolder(name); }

v1::JobSpec Spec(v1::ShardingStrategy::Value strategy, int world, bool adamw, int steps) {
  v1::JobSpec spec;
  for (int w : {6, 16, 12, 5}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  if (adamw) {
    spec.mutable_optimizer()->mutable_adamw()->set_lr(0.01);
  } else {
    spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
    spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  }
  spec.mutable_data()->mutable_synthetic()->set_seed(3);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(100);
  spec.set_global_batch_size(12);
  spec.set_steps(steps);
  spec.set_world_size(world);
  return spec;
}

absl::StatusOr<TrainingResult> TrainAll(const v1::JobSpec& spec, const std::string& job_id,
                                        int attempt, const std::string& job_uid = "") {
  testing::ThreadedOptions options;
  options.job_id = job_id;
  options.job_uid = job_uid;
  options.attempt = attempt;
  auto run = testing::TrainInThreads(spec, options);
  if (!run.ok()) return run.status();
  return run->rank0;
}

// The two files hold the same tensors, bit for bit (none missing, none extra).
void ExpectSameModel(const std::string& want_path, const std::string& got_path) {
  auto want = ReadSafetensors(want_path);
  auto got = ReadSafetensors(got_path);
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_FALSE(want->empty()) << want_path;
  EXPECT_EQ(got->size(), want->size()) << got_path;
  for (const auto& [name, tensor] : *want) {
    const auto found = got->find(name);
    ASSERT_NE(found, got->end()) << name;
    EXPECT_EQ(found->second.bytes, tensor.bytes) << name;
  }
}

class ResumeTest : public ::testing::TestWithParam<bool> {};

TEST_P(ResumeTest, AResumedRunEqualsAnUninterruptedOneBitForBit) {
  const bool adamw = GetParam();
  const std::string dir = TempDir(adamw ? "resume-adamw" : "resume-sgd");
  // Uninterrupted: 20 steps.
  v1::JobSpec straight = Spec(v1::ShardingStrategy::FULL_SHARD, 3, adamw, 20);
  straight.mutable_output()->set_final_model_path(dir + "/straight.safetensors");
  ASSERT_TRUE(TrainAll(straight, "job-a", 1).ok());

  // Interrupted: attempt 1 stops after 10 steps with a checkpoint every 5 (as if its
  // workers were lost), attempt 2 runs the whole job again and must resume at step 10.
  v1::JobSpec first = straight;
  first.set_steps(10);
  first.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  first.mutable_output()->set_checkpoint_interval_steps(5);
  first.mutable_output()->set_final_model_path(dir + "/unused.safetensors");
  auto part = TrainAll(first, "job-b", 1);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->checkpoints_written, 2);
  ASSERT_TRUE(std::filesystem::exists(dir + "/ckpt/step-00000010/manifest.json"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/ckpt/step-00000010/rank-00002.safetensors"));

  v1::JobSpec second = first;
  second.set_steps(20);
  second.mutable_output()->set_checkpoint_interval_steps(0);
  second.mutable_output()->set_final_model_path(dir + "/resumed.safetensors");
  auto resumed = TrainAll(second, "job-b", 2);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from_step, 10);

  ExpectSameModel(dir + "/straight.safetensors", dir + "/resumed.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ResumeTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "AdamW" : "SgdMomentum"; });

// The loss scaler's state is part of the checkpoint: a resumed job goes on with the scale
// it had (after a backoff and growths), not from init_scale.
TEST(Checkpoint, TheLossScaleSurvivesAResume) {
  const std::string dir = TempDir("resume-scaler");
  v1::JobSpec straight = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 16);
  straight.mutable_grad_scaler()->set_enabled(true);
  straight.mutable_grad_scaler()->set_growth_interval(3);
  straight.mutable_output()->set_final_model_path(dir + "/straight.safetensors");
  testing::ThreadedOptions inject;
  inject.faults = [](int rank) {
    TrainingFaults faults;
    if (rank == 1) {
      faults.corrupt_inputs = [](int64_t step, int, MicroBatch* batch) {
        if (step == 4) batch->inputs[0] = std::numeric_limits<float>::infinity();
      };
    }
    return faults;
  };
  inject.job_id = "job-a";
  auto a = testing::TrainInThreads(straight, inject);
  ASSERT_TRUE(a.ok()) << a.status();

  v1::JobSpec first = straight;
  first.set_steps(8);
  first.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  first.mutable_output()->set_checkpoint_interval_steps(8);
  first.mutable_output()->set_final_model_path(dir + "/unused.safetensors");
  inject.job_id = "job-b";
  ASSERT_TRUE(testing::TrainInThreads(first, inject).ok());
  v1::JobSpec second = first;
  second.set_steps(16);
  second.mutable_output()->set_checkpoint_interval_steps(0);
  second.mutable_output()->set_final_model_path(dir + "/resumed.safetensors");
  inject.attempt = 2;
  auto b = testing::TrainInThreads(second, inject);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->rank0.resumed_from_step, 8);

  // Steps 0-3 clean (growth after 3), step 4 skipped (backoff), then 11 clean steps.
  const v1::GradScalerState& want = a->rank0_last_progress.grad_scaler();
  EXPECT_EQ(want.scale(), 65536.0 * 2 * 0.5 * 2 * 2 * 2);
  EXPECT_EQ(want.skipped_steps(), 1);
  EXPECT_EQ(b->rank0_last_progress.grad_scaler().scale(), want.scale());
  EXPECT_EQ(b->rank0_last_progress.grad_scaler().skipped_steps(), 1);
  EXPECT_EQ(b->rank0_last_progress.grad_scaler().growth_tracker(), want.growth_tracker());
  auto straight_model = ReadSafetensors(dir + "/straight.safetensors");
  auto resumed_model = ReadSafetensors(dir + "/resumed.safetensors");
  ASSERT_TRUE(straight_model.ok() && resumed_model.ok());
  EXPECT_TRUE(testing::ModelsClose(*resumed_model, *straight_model, 0, 0));
}

TEST(Checkpoint, LoadsIntoAnotherWorldSizeAndStrategy) {
  const std::string dir = TempDir("reshard");
  v1::JobSpec straight = Spec(v1::ShardingStrategy::SHARD_GRAD_OP, 2, true, 12);
  straight.mutable_output()->set_final_model_path(dir + "/straight.safetensors");
  ASSERT_TRUE(TrainAll(straight, "job-s", 1).ok());

  v1::JobSpec wide = Spec(v1::ShardingStrategy::FULL_SHARD, 4, true, 6);  // 4 ranks, pads
  wide.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  wide.mutable_output()->set_checkpoint_interval_steps(6);
  ASSERT_TRUE(TrainAll(wide, "job-w", 1).ok());
  v1::JobSpec narrow = straight;
  narrow.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  narrow.mutable_output()->set_final_model_path(dir + "/resharded.safetensors");
  auto resumed = TrainAll(narrow, "job-w", 2);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from_step, 6);

  // The reductions ran over other rank counts for 6 steps: equal within fp32 tolerance.
  auto a = ReadSafetensors(dir + "/straight.safetensors");
  auto b = ReadSafetensors(dir + "/resharded.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(testing::ModelsClose(*b, *a, /*rtol=*/1e-5, /*atol=*/1e-6));
}

TEST(Checkpoint, ANewJobStartsFromAnotherJobsCheckpoint) {
  const std::string dir = TempDir("init");
  v1::JobSpec producer = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  producer.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  producer.mutable_output()->set_checkpoint_interval_steps(2);
  producer.mutable_output()->set_final_model_path(dir + "/producer.safetensors");
  ApplyJobSpecDefaults(&producer);  // as the coordinator admits it: the manifest holds these
  ASSERT_TRUE(TrainAll(producer, "job-p", 1).ok());
  const absl::StatusOr<FoundCheckpoint> found = FindLatestCheckpoint(dir + "/ckpt");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->folder, dir + "/ckpt/step-00000004");
  EXPECT_EQ(found->step, 4);
  EXPECT_EQ(found->manifest.step(), 4);  // the manifest read where the step was found
  EXPECT_EQ(found->manifest.job_id(), "job-p");
  // A step spelt otherwise (copied by hand as "step-9") is passed over: the ranks agree
  // on a step number and would each open step-00000009, which is not there.
  std::filesystem::copy(dir + "/ckpt/step-00000004", dir + "/ckpt/step-9",
                        std::filesystem::copy_options::recursive);
  EXPECT_EQ(FindLatestCheckpoint(dir + "/ckpt")->folder, dir + "/ckpt/step-00000004");
  std::filesystem::remove_all(dir + "/ckpt/step-9");

  v1::JobSpec consumer = Spec(v1::ShardingStrategy::NO_SHARD, 3, false, 1);
  consumer.set_global_batch_size(12);
  consumer.mutable_init()->set_checkpoint_dir(dir + "/ckpt");
  // Checked at submission as a worker will check it.
  const absl::Status submitted = ValidateJobSpec(consumer, LimitsLifted(), CheckReadableFile);
  EXPECT_TRUE(submitted.ok()) << submitted;
  ApplyJobSpecDefaults(&consumer);
  auto loaded =
      LoadCheckpoint(FindLatestCheckpoint(dir + "/ckpt")->folder, consumer, ShardingPlan());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto producer_model = ReadSafetensors(dir + "/producer.safetensors");
  ASSERT_TRUE(producer_model.ok());
  // A rank of one holds its units whole: the producer's final model, by their names.
  auto layout = BuildFlatLayout(consumer.model(), consumer.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  TensorMap model;
  for (int u = 0; u < static_cast<int>(loaded->params.size()); ++u) {
    if (!loaded->params[u].empty()) AddUnitTensors(*layout, u, loaded->params[u].data(), &model);
  }
  for (const auto& [name, tensor] : *producer_model) {
    EXPECT_EQ(model.at(name).bytes, tensor.bytes) << name;
  }
  EXPECT_EQ(loaded->manifest.optimizer_steps(), 4);
  EXPECT_EQ(loaded->optimizer_state[0].count("momentum"), 1u);
  auto trained = TrainAll(consumer, "job-c", 1);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(trained->resumed_from_step, -1);  // a new job counts its own steps

  v1::JobSpec other_model = consumer;
  other_model.mutable_model()->set_layer_widths(1, 17);
  const std::string differs =
      "holds another model than job.model (from the checkpoint's to the "
      "job's: modified: layer_widths[1]: 16 -> 17)";
  auto refused = TrainAll(other_model, "job-d", 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(differs), std::string::npos) << refused.status();
  absl::Status at_submission = ValidateJobSpec(other_model, LimitsLifted(), CheckReadableFile);
  EXPECT_EQ(at_submission.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(at_submission.message().find("job.init.checkpoint_dir: checkpoint '"),
            std::string::npos)
      << at_submission;
  EXPECT_NE(at_submission.message().find(differs), std::string::npos) << at_submission;

  // A folder without a complete checkpoint yet (its job still running) is accepted at
  // submission; a worker starting before one is written fails the job for good.
  std::filesystem::create_directories(dir + "/early/step-00000009");
  v1::JobSpec early = consumer;
  early.mutable_init()->set_checkpoint_dir(dir + "/early");
  at_submission = ValidateJobSpec(early, LimitsLifted(), CheckReadableFile);
  EXPECT_TRUE(at_submission.ok()) << at_submission;
  EXPECT_EQ(TrainAll(early, "job-e", 1).status().code(), absl::StatusCode::kNotFound);
}

// A producer's checkpoints of steps 2 and 4 in `dir`/ckpt, and a job of 2 steps started
// from step 2 alone (`dir`/only holds a copy of it), its model in `dir`/alone.safetensors:
// what a consumer of `dir`/ckpt started from step 2 must equal. Returns that job's spec.
v1::JobSpec StartedFromStep2Alone(const std::string& dir) {
  v1::JobSpec producer = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  producer.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  producer.mutable_output()->set_checkpoint_interval_steps(2);
  ApplyJobSpecDefaults(&producer);
  EXPECT_TRUE(TrainAll(producer, "job-p", 1).ok());
  std::filesystem::create_directories(dir + "/only");
  std::filesystem::copy(dir + "/ckpt/step-00000002", dir + "/only/step-00000002");

  v1::JobSpec alone = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 2);
  alone.mutable_init()->set_checkpoint_dir(dir + "/only");
  alone.mutable_output()->set_final_model_path(dir + "/alone.safetensors");
  ApplyJobSpecDefaults(&alone);
  EXPECT_TRUE(TrainAll(alone, "job-alone", 1).ok());
  return alone;
}

// A checkpoint removed after rank 0 chose it and before the ranks read it (a producer
// keeping one checkpoint moves on) is chosen again: the ranks start together from the
// newest one left, as a job given only that one does.
TEST(Checkpoint, ACheckpointRemovedWhileTheRanksLoadItIsChosenAgain) {
  const std::string dir = TempDir("removed");
  const v1::JobSpec alone = StartedFromStep2Alone(dir);

  v1::JobSpec raced = alone;
  raced.mutable_init()->set_checkpoint_dir(dir + "/ckpt");
  raced.mutable_output()->set_final_model_path(dir + "/raced.safetensors");
  // Rank 1 removes step 4 once both ranks chose it; rank 0 reads after that.
  std::promise<void> removal;
  std::shared_future<void> removed = removal.get_future().share();
  std::atomic<int> chose_step_4{0};
  testing::ThreadedOptions options;
  options.job_id = "job-raced";
  options.faults = [&](int rank) {
    TrainingFaults faults;
    faults.at_point = [&, rank](int64_t step, const char* point) {
      if (std::string(point) != "loading the checkpoint" || step != 4) return;
      ++chose_step_4;
      if (rank == 1) {
        std::filesystem::remove_all(dir + "/ckpt/step-00000004");
        removal.set_value();
      } else {
        removed.wait();
      }
    };
    return faults;
  };
  auto trained = testing::TrainInThreads(raced, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(chose_step_4, 2);
  ExpectSameModel(dir + "/alone.safetensors", dir + "/raced.safetensors");
}

// The first attempt starts from init.checkpoint_dir's newest and says which; a later one
// (Assignment.init_checkpoint_step) starts from that one though a newer one is there by
// then, and fails for good, naming it, where it is gone.
TEST(Checkpoint, ALaterAttemptStartsFromTheInitCheckpointTheFirstStartedFrom) {
  const std::string dir = TempDir("pinned");
  const v1::JobSpec alone = StartedFromStep2Alone(dir);
  v1::JobSpec consumer = alone;
  consumer.mutable_init()->set_checkpoint_dir(dir + "/ckpt");
  consumer.mutable_output()->set_final_model_path(dir + "/first.safetensors");
  testing::ThreadedOptions options;
  options.job_id = "job-c";
  auto first = testing::TrainInThreads(consumer, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rank0_last_progress.init_checkpoint_step(), 4);

  consumer.mutable_output()->set_final_model_path(dir + "/later.safetensors");
  options.attempt = 2;
  options.init_checkpoint_step = 2;
  auto later = testing::TrainInThreads(consumer, options);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->rank0_last_progress.init_checkpoint_step(), 2);
  ExpectSameModel(dir + "/alone.safetensors", dir + "/later.safetensors");

  std::filesystem::remove_all(dir + "/ckpt/step-00000002");
  auto gone = testing::TrainInThreads(consumer, options);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(gone.status().message(),
                                "the checkpoint of step 2 that the job's first attempt started "
                                "from is gone"))
      << gone.status();
}

std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// output.keep_checkpoints: once a checkpoint is complete, the job's older ones beyond the
// newest K go; another job's checkpoint and a step folder without a manifest (no job is
// known to own it) stay, and the job resumes from its newest.
TEST(Checkpoint, KeepsOnlyTheJobsNewestCheckpoints) {
  const std::string dir = TempDir("keep");
  v1::JobSpec other = Spec(v1::ShardingStrategy::FULL_SHARD, 2, true, 3);
  other.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  other.mutable_output()->set_checkpoint_interval_steps(3);
  ASSERT_TRUE(TrainAll(other, "job-other", 1).ok());
  std::filesystem::create_directories(dir + "/ckpt/step-00000005");
  std::ofstream(dir + "/ckpt/step-00000005/rank-00000.safetensors") << "cut short";

  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, true, 10);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  spec.mutable_output()->set_keep_checkpoints(2);
  auto trained = TrainAll(spec, "job-k", 1);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_EQ(trained->checkpoints_written, 5);
  EXPECT_EQ(Listing(dir + "/ckpt"), (std::vector<std::string>{"step-00000003", "step-00000005",
                                                              "step-00000008", "step-00000010"}));
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-k", ""})->folder,
            dir + "/ckpt/step-00000010");
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-other", ""})->folder,
            dir + "/ckpt/step-00000003");

  // An attempt that a later one superseded removes nothing.
  const absl::StatusOr<int> stale =
      RemoveOlderCheckpoints(dir + "/ckpt", 10, CheckpointAuthor{"job-k", 0}, 1);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_TRUE(std::filesystem::exists(dir + "/ckpt/step-00000008/manifest.json"));
  // Nor does a step that is not a checkpoint of the job (none written there).
  EXPECT_EQ(*RemoveOlderCheckpoints(dir + "/ckpt", 12, CheckpointAuthor{"job-k", 1}, 1), 0);
  EXPECT_EQ(*RemoveOlderCheckpoints(dir + "/ckpt", 10, CheckpointAuthor{"job-k", 1}, 1), 1);
  EXPECT_EQ(Listing(dir + "/ckpt"),
            (std::vector<std::string>{"step-00000003", "step-00000005", "step-00000010"}));
}

// Job ids repeat across state files: a coordinator started over numbers its jobs from
// job-1 again. Its job-1 (another uid), re-queued into the checkpoint folder the old job-1
// wrote, is another job there: it neither resumes from, prunes nor writes over the old
// job-1's steps.
TEST(Checkpoint, AnotherStateFilesJobOfTheSameIdIsAnotherJob) {
  const std::string dir = TempDir("same-id");
  v1::JobSpec old_job = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  old_job.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  old_job.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(old_job, "job-1", 1, "a1a1a1a1a1").ok());

  v1::JobSpec new_job = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 6);
  new_job.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  new_job.mutable_output()->set_checkpoint_interval_steps(2);
  new_job.mutable_output()->set_keep_checkpoints(1);
  const std::string old_shard = dir + "/ckpt/step-00000002/rank-00000.safetensors";
  const std::string old_bytes = ReadText(old_shard);
  const auto collided = TrainAll(new_job, "job-1", 2, "b2b2b2b2b2");
  EXPECT_EQ(collided.status().code(), absl::StatusCode::kAlreadyExists) << collided.status();
  EXPECT_TRUE(absl::StrContains(collided.status().message(),
                                "holds the checkpoint of another job job-1 (uid a1a1a1a1..., of "
                                "another state file)"))
      << collided.status();
  EXPECT_EQ(ReadText(old_shard), old_bytes);  // not written over

  new_job.mutable_output()->set_checkpoint_interval_steps(3);
  const auto trained = TrainAll(new_job, "job-1", 2, "b2b2b2b2b2");
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_LT(trained->resumed_from_step, 0);  // not from the old job-1's step 4
  EXPECT_EQ(Listing(dir + "/ckpt"),
            (std::vector<std::string>{"step-00000002", "step-00000004", "step-00000006"}));
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-1", "a1a1a1a1a1"})->folder,
            dir + "/ckpt/step-00000004");
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-1", "b2b2b2b2b2"})->folder,
            dir + "/ckpt/step-00000006");
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-1", ""}).status().code(),
            absl::StatusCode::kNotFound);  // a job-1 from before uids: neither is its own
}

// The step just written, mixed since with another attempt's shard, is no checkpoint: the
// older ones it would replace stay (else nothing would be left to resume from).
TEST(Checkpoint, NothingIsRemovedForAStepThatIsNotACheckpoint) {
  const std::string dir = TempDir("keep-mixed");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-m", 1).ok());
  const std::string shard_path = dir + "/ckpt/step-00000004/rank-00001.safetensors";
  auto shard = ReadSafetensors(shard_path);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE(WriteSafetensors(shard_path, *shard, {{"shardwise.attempt", "2"}}).ok());
  const absl::StatusOr<int> removed =
      RemoveOlderCheckpoints(dir + "/ckpt", 4, CheckpointAuthor{"job-m", 1}, 1);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-m", ""})->folder,
            dir + "/ckpt/step-00000002");
}

// Two jobs writing the same step of one checkpoint folder (a job submitted again with the
// same output.checkpoint_dir, both at attempt 1): a step holding one job's manifest and
// the other's shard is no checkpoint, for anyone.
TEST(Checkpoint, AStepMixingTwoJobsShardsIsNotACheckpoint) {
  const std::string dir = TempDir("two-jobs");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/a");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-a", 1).ok());
  spec.mutable_output()->set_checkpoint_dir(dir + "/b");
  spec.mutable_data()->mutable_synthetic()->set_seed(4);
  ASSERT_TRUE(TrainAll(spec, "job-b", 1).ok());
  std::filesystem::copy_file(dir + "/b/step-00000004/rank-00001.safetensors",
                             dir + "/a/step-00000004/rank-00001.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(FindLatestCheckpoint(dir + "/a")->folder, dir + "/a/step-00000002");
  const absl::Status mixed =
      LoadCheckpoint(dir + "/a/step-00000004", spec, ShardingPlan()).status();
  EXPECT_EQ(mixed.code(), absl::StatusCode::kDataLoss) << mixed;
  EXPECT_NE(mixed.message().find("rank-00001.safetensors was written by job job-b, not by job "
                                 "job-a"),
            std::string::npos)
      << mixed;
}

// Two jobs given one output.checkpoint_dir: the second writes none of its steps over the
// first's (it replaced them, shards and manifest, before), and says why.
TEST(Checkpoint, AJobNeverWritesOverAnotherJobsCheckpoint) {
  const std::string dir = TempDir("shared");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-a", 1).ok());
  const std::string shard = dir + "/ckpt/step-00000002/rank-00000.safetensors";
  const std::string before = ReadText(shard);
  spec.mutable_data()->mutable_synthetic()->set_seed(4);
  const absl::Status refused = TrainAll(spec, "job-b", 1).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists) << refused;
  EXPECT_TRUE(
      absl::StrContains(refused.message(), "output.checkpoint_dir: '" + dir +
                                               "/ckpt/step-00000002' holds the checkpoint "
                                               "of job job-a; a job never replaces another's"))
      << refused;
  EXPECT_EQ(ReadText(shard), before);
  EXPECT_EQ(ReadCheckpointManifest(dir + "/ckpt/step-00000004")->job_id(), "job-a");
}

// A unit's optimizer states are all the optimizer keeps or none: a checkpoint holding
// some (damaged, or put together by hand) is refused by name, not stepped through (an
// AdamW without its second moment writes through nothing); a negative step count too.
TEST(Checkpoint, AUnitHoldingSomeOfItsOptimizerStatesIsRefused) {
  const std::string dir = TempDir("states");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, true, 2);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-s", 1).ok());
  const std::string folder = dir + "/ckpt/step-00000002";
  for (const char* file : {"/rank-00000.safetensors", "/rank-00001.safetensors"}) {
    const std::string path = folder + file;
    auto shard = ReadSafetensors(path);
    auto metadata = ReadSafetensorsMetadata(path);
    ASSERT_TRUE(shard.ok() && metadata.ok());
    ASSERT_EQ(shard->erase("unit0.exp_avg_sq"), 1u);
    ASSERT_TRUE(WriteSafetensors(path, *shard, *metadata).ok());
  }
  const absl::Status partial = LoadCheckpoint(folder, spec, ShardingPlan()).status();
  EXPECT_EQ(partial.code(), absl::StatusCode::kDataLoss) << partial;
  EXPECT_NE(partial.message().find("holds the optimizer states exp_avg of unit 0; its adamw "
                                   "optimizer keeps exp_avg, exp_avg_sq"),
            std::string::npos)
      << partial;
  // An optimizer of another kind reads no state, so a checkpoint's states do not matter.
  v1::JobSpec sgd = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 2);
  auto loaded = LoadCheckpoint(folder, sgd, ShardingPlan());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->optimizer_state[0].empty());

  v1::CheckpointManifest manifest;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadText(folder + "/manifest.json"), &manifest)
          .ok());
  manifest.set_optimizer_steps(-3);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(manifest, &json).ok());
  std::ofstream(folder + "/manifest.json", std::ios::trunc) << json;
  EXPECT_EQ(LoadCheckpoint(folder, sgd, ShardingPlan()).status().code(),
            absl::StatusCode::kDataLoss);
}

// A manifest with a field a later release added (both releases run during an upgrade) is
// still read: its step is not passed over as damaged.
TEST(Checkpoint, AManifestWithAFieldOfALaterReleaseIsRead) {
  const std::string dir = TempDir("later-release");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-r", 1).ok());
  const std::string newest = dir + "/ckpt/step-00000004";
  std::string json = ReadText(newest + "/manifest.json");
  ASSERT_EQ(json.front(), '{');
  json.insert(1, "\"a_later_field\": {\"x\": 1},");
  std::ofstream(newest + "/manifest.json", std::ios::trunc) << json;
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-r", ""})->folder, newest);
  // Damage is still damage, and says what the parser found.
  std::ofstream(newest + "/manifest.json", std::ios::trunc) << "{\"step\": \"four\"}";
  const absl::Status damaged = ReadCheckpointManifest(newest).status();
  EXPECT_EQ(damaged.code(), absl::StatusCode::kDataLoss) << damaged;
  EXPECT_NE(damaged.message().find("unreadable manifest: "), std::string::npos) << damaged;
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-r", ""})->folder,
            dir + "/ckpt/step-00000002");
}

// A restarted attempt passes over a damaged step of its own (saying which and why) for
// the complete one before it; a step without a manifest (a write cut short) or with a
// later attempt's shards (a rewrite cut short) is passed over uncounted. When every step
// with a manifest is damaged, the attempt fails (DATA_LOSS) rather than train the job
// again from its start over them.
TEST(Checkpoint, ARestartPassesOverDamagedStepsAndFailsWhenNoneIsLeft) {
  const std::string dir = TempDir("damaged");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-d", 1).ok());
  const std::string ckpt = dir + "/ckpt";
  std::filesystem::create_directories(ckpt + "/step-00000006");  // cut short: no manifest
  std::filesystem::resize_file(ckpt + "/step-00000004/rank-00001.safetensors", 16);
  std::vector<PassedOverStep> passed_over;
  EXPECT_EQ(FindLatestCheckpointOf(ckpt, {"job-d", ""}, &passed_over)->folder,
            ckpt + "/step-00000002");
  ASSERT_EQ(passed_over.size(), 1u);
  EXPECT_EQ(passed_over[0].step, 4);
  EXPECT_TRUE(absl::StrContains(passed_over[0].why, "step-00000004")) << passed_over[0].why;

  std::filesystem::resize_file(ckpt + "/step-00000002/rank-00000.safetensors", 16);
  passed_over.clear();
  EXPECT_EQ(FindLatestCheckpointOf(ckpt, {"job-d", ""}, &passed_over).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(passed_over.size(), 2u);
  const auto restarted = TrainAll(spec, "job-d", 2);
  EXPECT_EQ(restarted.status().code(), absl::StatusCode::kDataLoss) << restarted.status();
  EXPECT_TRUE(absl::StrContains(restarted.status().message(),
                                "output.checkpoint_dir: each of the 2 checkpoints this job wrote "
                                "in '" +
                                    ckpt + "' is damaged (the newest, step 4: "))
      << restarted.status();
}

// Each rank's progress names the job's newest checkpoint it knows complete, which the
// coordinator tells later attempts: one that finds none of the job's in the folder (its
// host sees another one than the job wrote to) fails as UNAVAILABLE, the attempt's fault,
// rather than train the job again from its start.
TEST(Checkpoint, ALaterAttemptThatFindsNoneOfTheReportedCheckpointsFailsRatherThanStartOver) {
  const std::string dir = TempDir("reported");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  testing::ThreadedOptions options;
  options.job_id = "job-n";
  const auto first = testing::TrainInThreads(spec, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->rank0_last_progress.has_checkpoint_step());
  EXPECT_EQ(first->rank0_last_progress.checkpoint_step(), 4);

  options.attempt = 2;
  options.own_checkpoint_step = 4;
  const auto resumed = testing::TrainInThreads(spec, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->rank0.resumed_from_step, 4);

  // This host's folder holds none of the job's checkpoints.
  spec.mutable_output()->set_checkpoint_dir(dir + "/not-the-shared-one");
  options.attempt = 3;
  const auto elsewhere = testing::TrainInThreads(spec, options);
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kUnavailable) << elsewhere.status();
  EXPECT_TRUE(absl::StrContains(elsewhere.status().message(),
                                "an earlier attempt of the job wrote its checkpoint of step 4"))
      << elsewhere.status();
  EXPECT_FALSE(IsPermanent(elsewhere.status())) << elsewhere.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/not-the-shared-one/step-00000002"));
  // None reported (the job wrote none yet): the attempt starts from the seed.
  options.own_checkpoint_step.reset();
  const auto from_seed = testing::TrainInThreads(spec, options);
  ASSERT_TRUE(from_seed.ok()) << from_seed.status();
  EXPECT_EQ(from_seed->rank0.resumed_from_step, -1);
}

// A step whose shards a later attempt wrote over its manifest's (it resumed from an
// older step and was rewriting this one when it stopped) is no damage.
TEST(Checkpoint, AStepBeingRewrittenByALaterAttemptIsNotDamage) {
  const std::string dir = TempDir("rewritten");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 2);
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  spec.mutable_output()->set_checkpoint_dir(dir + "/first");
  ASSERT_TRUE(TrainAll(spec, "job-w", 1).ok());
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  ASSERT_TRUE(TrainAll(spec, "job-w", 3).ok());  // no checkpoint of its own: from the seed
  // Attempt 3's shards under attempt 1's manifest.
  const std::string step = dir + "/ckpt/step-00000002";
  std::ofstream(step + "/manifest.json", std::ios::trunc)
      << ReadText(dir + "/first/step-00000002/manifest.json");
  std::vector<PassedOverStep> passed_over;
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-w", ""}, &passed_over).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(passed_over.empty()) << passed_over[0].why;
}

ShardingPlan RankOf(int shard_size, int shard_rank) {
  ShardingPlan plan;
  plan.world_size = plan.shard_size = shard_size;
  plan.rank = plan.shard_rank = shard_rank;
  return plan;
}

// A rank reads its own shard of the parameters and optimizer state only, cut from
// whichever of the writers' files hold it: for every group size, the ranks' shards laid
// end to end are the whole (then the padding, zeros).
TEST(Checkpoint, EachRankReadsItsOwnShardOfTheParametersAndOptimizerState) {
  const std::string dir = TempDir("own-shard");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 4, true, 2);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-o", 1).ok());
  const std::string folder = dir + "/ckpt/step-00000002";
  auto whole = LoadCheckpoint(folder, spec, ShardingPlan());
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->optimizer_state[0].count("exp_avg_sq"), 1u);

  for (int group : {2, 3, 5, 7}) {
    // Per unit, "param" and each optimizer state, the ranks' shards end to end.
    std::vector<std::map<std::string, std::vector<float>>> joined(whole->optimizer_state.size());
    for (int rank = 0; rank < group; ++rank) {
      auto part = LoadCheckpoint(folder, spec, RankOf(group, rank));
      ASSERT_TRUE(part.ok()) << part.status();
      for (int u = 0; u < static_cast<int>(joined.size()); ++u) {
        const int64_t numel = whole->manifest.units(u).numel();
        auto shards = part->optimizer_state[u];
        shards["param"] = part->params[u];
        for (const auto& [what, shard] : shards) {
          EXPECT_EQ(static_cast<int64_t>(shard.size()), PaddedNumel(numel, group) / group);
          joined[u][what].insert(joined[u][what].end(), shard.begin(), shard.end());
        }
      }
    }
    for (size_t u = 0; u < joined.size(); ++u) {
      auto wholes = whole->optimizer_state[u];
      wholes["param"] = whole->params[u];
      ASSERT_EQ(joined[u].size(), wholes.size()) << "unit " << u;
      for (const auto& [what, full] : wholes) {
        std::vector<float> padded = full;
        padded.resize(PaddedNumel(static_cast<int64_t>(full.size()), group), 0.0f);
        EXPECT_EQ(joined[u][what], padded) << "unit " << u << " " << what << " group " << group;
      }
    }
  }
}

// A checkpoint folder is outside input: a manifest naming files outside the folder, units
// the model does not have, or shards of the wrong size or type are DATA_LOSS, never read.
TEST(Checkpoint, ATamperedCheckpointIsRefusedWithoutReadingOutsideIt) {
  const std::string dir = TempDir("tampered");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, true, 2);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-t", 1).ok());
  const std::string folder = dir + "/ckpt/step-00000002";
  ASSERT_TRUE(LoadCheckpoint(folder, spec, ShardingPlan()).ok());
  v1::CheckpointManifest original;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadText(folder + "/manifest.json"), &original)
          .ok());

  auto load_with = [&](const v1::CheckpointManifest& manifest) {
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(manifest, &json);
    std::ofstream(folder + "/manifest.json", std::ios::trunc) << json;
    return LoadCheckpoint(folder, spec, ShardingPlan()).status();
  };
  v1::CheckpointManifest traversal = original;
  traversal.set_files(1, "../../secret.safetensors");
  absl::Status status = load_with(traversal);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("is named '../../secret.safetensors'"), std::string::npos)
      << status;
  v1::CheckpointManifest wrong_size = original;
  wrong_size.mutable_units(0)->set_numel(original.units(0).numel() + 1000);
  status = load_with(wrong_size);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("unit 0 is listed with"), std::string::npos) << status;
  v1::CheckpointManifest missing_file = original;
  missing_file.mutable_files()->RemoveLast();
  EXPECT_EQ(load_with(missing_file).code(), absl::StatusCode::kDataLoss);

  // A shard whose unit tensor has another size than the manifest says.
  ASSERT_TRUE(load_with(original).ok());
  auto shard = ReadSafetensors(folder + "/rank-00001.safetensors");
  ASSERT_TRUE(shard.ok());
  HostTensor& first = shard->begin()->second;
  first.bytes.resize(first.bytes.size() - 4);
  first.shape = {static_cast<int64_t>(first.bytes.size() / 4)};
  auto metadata = ReadSafetensorsMetadata(folder + "/rank-00001.safetensors");  // its attempt
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  ASSERT_TRUE(WriteSafetensors(folder + "/rank-00001.safetensors", *shard, *metadata).ok());
  status = LoadCheckpoint(folder, spec, ShardingPlan()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("as F32 ["), std::string::npos) << status;
}

// Inside a checkpoint folder nothing is read through a link and nothing blocks: a step
// folder that is a link (to another job's checkpoint, say) or whose manifest is a FIFO
// is passed over when looking for the latest, and refused when named; a shard that is a
// link is refused.
TEST(Checkpoint, LinksAndFifosInsideTheFolderAreNeitherFollowedNorWaitedOn) {
  const std::string dir = TempDir("links");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 2);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-l", 1).ok());
  v1::JobSpec elsewhere = spec;
  elsewhere.mutable_output()->set_checkpoint_dir(dir + "/other");
  ASSERT_TRUE(TrainAll(elsewhere, "job-l", 1).ok());
  const std::string real = dir + "/ckpt/step-00000002";
  ASSERT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-l", ""})->folder, real);

  std::filesystem::create_directory_symlink(dir + "/other/step-00000002",
                                            dir + "/ckpt/step-00000099");
  std::filesystem::create_directories(dir + "/ckpt/step-00000050");
  ASSERT_EQ(mkfifo((dir + "/ckpt/step-00000050/manifest.json").c_str(), 0600), 0);
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-l", ""})->folder, real);
  const absl::Status linked =
      LoadCheckpoint(dir + "/ckpt/step-00000099", spec, ShardingPlan()).status();
  EXPECT_EQ(linked.code(), absl::StatusCode::kInvalidArgument) << linked;
  EXPECT_EQ(LoadCheckpoint(dir + "/ckpt/step-00000050", spec, ShardingPlan()).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::filesystem::rename(real + "/rank-00001.safetensors", real + "/moved.safetensors");
  std::filesystem::create_symlink(real + "/moved.safetensors", real + "/rank-00001.safetensors");
  const absl::Status shard = LoadCheckpoint(real, spec, ShardingPlan()).status();
  EXPECT_EQ(shard.code(), absl::StatusCode::kInvalidArgument) << shard;
  EXPECT_NE(shard.message().find("rank-00001.safetensors"), std::string::npos) << shard;

  // The checkpoint folder itself swapped for a link since the worker's check: refused,
  // not read as "no checkpoint" (a resumed attempt would start over from its seed).
  std::filesystem::rename(dir + "/ckpt", dir + "/ckpt.old");
  std::filesystem::create_directory_symlink(dir + "/ckpt.old", dir + "/ckpt");
  const absl::Status swapped = FindLatestCheckpointOf(dir + "/ckpt", {"job-l", ""}).status();
  EXPECT_EQ(swapped.code(), absl::StatusCode::kInvalidArgument) << swapped;
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/missing", {"job-l", ""}).status().code(),
            absl::StatusCode::kNotFound);
}

// An attempt cut off from the coordinator trains on while the job runs again elsewhere:
// once the later attempt has written a step there, the earlier one writes no more
// checkpoints (FAILED_PRECONDITION, superseded); a step whose shards name another attempt
// than its manifest, or whose manifest names another step, is not a checkpoint.
TEST(Checkpoint, ASupersededAttemptWritesNoMoreAndMixedStepsAreNotCheckpoints) {
  const std::string dir = TempDir("fenced");
  v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(TrainAll(spec, "job-f", 2).ok());  // the attempt that replaced it
  const auto stale = TrainAll(spec, "job-f", 1);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_NE(stale.status().message().find("attempt 2 of job job-f wrote"), std::string::npos)
      << stale.status();
  EXPECT_NE(stale.status().message().find("this attempt (1) was superseded"), std::string::npos)
      << stale.status();
  const std::string newest = dir + "/ckpt/step-00000004";
  ASSERT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-f", ""})->folder, newest);
  ASSERT_TRUE(LoadCheckpoint(newest, spec, ShardingPlan()).ok());

  // One shard of step 4 rewritten by attempt 1: step 2 is the newest checkpoint now.
  const std::string shard_path = newest + "/rank-00001.safetensors";
  auto shard = ReadSafetensors(shard_path);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE(WriteSafetensors(shard_path, *shard, {{"shardwise.attempt", "1"}}).ok());
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-f", ""})->folder,
            dir + "/ckpt/step-00000002");
  const absl::Status mixed = LoadCheckpoint(newest, spec, ShardingPlan()).status();
  EXPECT_EQ(mixed.code(), absl::StatusCode::kDataLoss) << mixed;
  EXPECT_NE(mixed.message().find("rank-00001.safetensors was written by attempt 1, not by "
                                 "attempt 2"),
            std::string::npos)
      << mixed;
  // A shard naming no attempt (a worker of an older release wrote it) is taken as it is.
  ASSERT_TRUE(WriteSafetensors(shard_path, *shard).ok());
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-f", ""})->folder, newest);
  ASSERT_TRUE(WriteSafetensors(shard_path, *shard, {{"shardwise.attempt", "1"}}).ok());

  // A step folder whose manifest says another step (renamed, or damaged) is passed over.
  std::filesystem::rename(dir + "/ckpt/step-00000002", dir + "/ckpt/step-00000003");
  EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-f", ""}).status().code(),
            absl::StatusCode::kNotFound);
}

// A step this process may not read (its manifest's permissions, or a shard's) is not
// passed over for an older one: a resumed attempt would go back two steps, or a new job
// start from another checkpoint than the newest, without a word. The coordinator refuses
// it at submission naming the field, and a job's pruning leaves it (not its to judge).
TEST(Checkpoint, AStepThisProcessMayNotReadIsNotPassedOver) {
  const std::string dir = TempDir("unreadable");
  v1::JobSpec producer = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 6);
  producer.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  producer.mutable_output()->set_checkpoint_interval_steps(2);
  ApplyJobSpecDefaults(&producer);
  ASSERT_TRUE(TrainAll(producer, "job-u", 1).ok());
  const std::string newest = dir + "/ckpt/step-00000006";
  v1::JobSpec consumer = Spec(v1::ShardingStrategy::FULL_SHARD, 2, false, 1);
  consumer.mutable_init()->set_checkpoint_dir(dir + "/ckpt");

  for (const std::string name : {"manifest.json", "rank-00001.safetensors"}) {
    SCOPED_TRACE(name);
    const std::string path = absl::StrCat(newest, "/", name);
    std::filesystem::permissions(path, std::filesystem::perms::none);
    const absl::Status found = testing::AsReaderThatPermissionsKeepOut([&] {
      return FindLatestCheckpointOf(dir + "/ckpt", {"job-u", ""}).status();
    });
    EXPECT_EQ(found.code(), absl::StatusCode::kPermissionDenied) << found;
    EXPECT_NE(found.message().find(name), std::string::npos) << found;
    const absl::Status submitted = testing::AsReaderThatPermissionsKeepOut(
        [&] { return ValidateJobSpec(consumer, LimitsLifted(), CheckReadableFile); });
    EXPECT_EQ(submitted.code(), absl::StatusCode::kInvalidArgument) << submitted;
    EXPECT_NE(submitted.message().find("job.init.checkpoint_dir: "), std::string::npos)
        << submitted;
    EXPECT_NE(submitted.message().find(name), std::string::npos) << submitted;
    EXPECT_NE(submitted.message().find("this coordinator checks the newest step"),
              std::string::npos)
        << submitted;
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                  std::filesystem::perms::group_read | std::filesystem::perms::others_read);
    EXPECT_EQ(FindLatestCheckpointOf(dir + "/ckpt", {"job-u", ""})->folder, newest);
  }

  // Keeping one checkpoint at step 6: step 2 goes, step 4 with a shard it may not read stays.
  std::filesystem::permissions(dir + "/ckpt/step-00000004/rank-00001.safetensors",
                               std::filesystem::perms::none);
  const absl::StatusOr<int> removed = testing::AsReaderThatPermissionsKeepOut([&] {
    return RemoveOlderCheckpoints(dir + "/ckpt", 6, CheckpointAuthor{"job-u", 1}, 1);
  });
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(Listing(dir + "/ckpt"), (std::vector<std::string>{"step-00000004", "step-00000006"}));
}

TEST(Checkpoint, FoldersWithoutAManifestAreIgnored) {
  const std::string dir = TempDir("partial");
  std::filesystem::create_directories(dir + "/step-00000099");
  EXPECT_EQ(FindLatestCheckpoint(dir).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace shardwise::fsdp
