#include "client/format.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "contracts/job_summary.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::Job RunningJob() {
  v1::Job job;
  job.set_id("job-7");
  job.mutable_spec()->set_name("mlp");
  job.mutable_spec()->set_world_size(4);
  job.set_state(v1::RUNNING);
  job.set_reason("attempt 1: every rank joined the data plane");
  job.set_attempt(1);
  job.set_create_time_ms(1'000'000);
  job.mutable_progress()->set_step(50);
  job.mutable_progress()->set_total_steps(100);
  job.mutable_progress()->set_loss(0.43216);
  job.mutable_progress()->set_first_loss(2.5);
  job.mutable_progress()->set_steps_per_second(12.5);
  return job;
}

TEST(Format, ProgressLineShowsBarStepsLossAndSpeed) {
  EXPECT_EQ(FormatProgressLine(RunningJob(), 10),
            "[#####.....] 50/100 steps  loss 0.4322  12.50 steps/s  RUNNING");
  v1::Job fresh = RunningJob();
  fresh.mutable_progress()->set_step(0);
  fresh.mutable_progress()->set_phase("bootstrap");
  fresh.set_state(v1::SCHEDULED);
  EXPECT_EQ(FormatProgressLine(fresh, 4), "[....] 0/100 steps  SCHEDULED (bootstrap)");
}

// A waiting job's line says what it waits for; a line wider than the terminal is cut.
TEST(Format, APendingJobsLineSaysWhatItWaitsFor) {
  v1::Job job = RunningJob();
  job.set_state(v1::PENDING);
  job.mutable_progress()->set_step(0);
  job.set_reason("waiting for 4 CPU workers, but only 2 are registered");
  const std::string line = FormatProgressLine(job, 4);
  EXPECT_EQ(line,
            "[....] 0/100 steps  PENDING: waiting for 4 CPU workers, but only 2 are registered");
  EXPECT_EQ(FitToWidth(line, 30), "[....] 0/100 steps  PENDING: \u2026");
  EXPECT_EQ(FitToWidth(line, 200), line);
  EXPECT_EQ(FitToWidth(line, 0), line);
  EXPECT_EQ(FitToWidth("\u00e9\u00e9\u00e9\u00e9", 3), "\u00e9\u00e9\u2026");  // characters
  EXPECT_EQ(FitToWidth("\u00e9\u00e9\u00e9", 3), "\u00e9\u00e9\u00e9");        // 6 bytes, 3 wide
  EXPECT_EQ(FitToWidth("abc", 3), "abc");
}

TEST(Format, ALossReadEveryFewStepsSaysWhichStepItIs) {
  v1::Job job = RunningJob();
  job.mutable_progress()->set_loss_step(48);  // loss_read_interval_steps: 16
  EXPECT_EQ(FormatProgressLine(job, 10),
            "[#####.....] 50/100 steps  loss 0.4322 after step 48  12.50 steps/s  RUNNING");
  EXPECT_TRUE(
      absl::StrContains(FormatJobDescription(job, 1'000'000),
                        "Progress:   50/100 steps, loss 0.4322 after step 48 (first 2.5000)"));
  job.mutable_progress()->set_loss_step(50);
  EXPECT_EQ(FormatProgressLine(job, 10),
            "[#####.....] 50/100 steps  loss 0.4322  12.50 steps/s  RUNNING");
  // Steps done, none read yet.
  v1::Job unread = RunningJob();
  unread.mutable_progress()->set_step(3);
  unread.mutable_progress()->clear_loss();
  unread.mutable_progress()->clear_first_loss();
  EXPECT_EQ(FormatProgressLine(unread, 10),
            "[..........] 3/100 steps  loss -  12.50 steps/s  RUNNING");
}

v1::Job GptJob() {
  v1::Job job = RunningJob();
  v1::Progress* p = job.mutable_progress();
  p->set_tokens_per_second(12345);
  p->set_learning_rate(6e-4);
  p->set_val_loss(2.25);
  p->set_first_val_loss(5.5);
  p->set_val_loss_step(40);
  return job;
}

TEST(Format, GptJobsShowValidationLossLearningRateAndTokensPerSecond) {
  EXPECT_EQ(FormatProgressLine(GptJob(), 10),
            "[#####.....] 50/100 steps  loss 0.4322  val 2.2500  lr 0.0006  12.3k tok/s  RUNNING");
  const std::string description = FormatJobDescription(GptJob(), 1'000'000);
  EXPECT_TRUE(absl::StrContains(description, "Throughput: 12.3k tokens/s, learning rate 0.0006\n"))
      << description;
  EXPECT_TRUE(
      absl::StrContains(description, "Validation: loss 2.2500 after step 40 (first 5.5000)\n"))
      << description;
  v1::Job done = GptJob();
  done.set_state(v1::SUCCEEDED);
  const std::string summary = FormatJobSummary(done);
  EXPECT_TRUE(absl::StrContains(summary, "speed:  12.50 steps/s, 12.3k tokens/s")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "validation loss: 5.5000 -> 2.2500")) << summary;
  EXPECT_FALSE(absl::StrContains(summary, "memory:")) << "no peak reported: " << summary;
}

// The closing summary sets rank 0's measured peak beside the estimate it was admitted with.
TEST(Format, TheSummaryShowsThePeakMemoryBesideTheEstimate) {
  v1::Job done = GptJob();
  done.set_state(v1::SUCCEEDED);
  done.mutable_progress()->set_peak_allocated_bytes(int64_t{45} << 20);
  done.mutable_progress()->set_peak_reserved_bytes(int64_t{50} << 20);
  done.mutable_memory_per_rank()->set_total_bytes(int64_t{60} << 20);
  const std::string summary = FormatJobSummary(done);
  EXPECT_TRUE(absl::StrContains(
      summary, "  memory: peak 45.0 MiB allocated on rank 0 (estimated 60.0 MiB per rank)\n"))
      << summary;
}

TEST(Format, OneEvaluationShowsOneValidationLossWithItsStep) {
  v1::Job job = GptJob();
  job.set_state(v1::SUCCEEDED);
  job.mutable_progress()->set_first_val_loss(2.25);
  job.mutable_progress()->set_first_val_loss_step(40);
  const std::string summary = FormatJobSummary(job);
  EXPECT_TRUE(absl::StrContains(summary, "validation loss: 2.2500 after step 40\n")) << summary;
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description, "Validation: loss 2.2500 after step 40\n"))
      << description;
}

TEST(Format, JobTableHasOneRowPerJob) {
  v1::JobSummary mine = Summarize(RunningJob());
  mine.set_submitter("alice");
  const std::string table = FormatJobTable({Summarize(RunningJob()), mine}, 1'000'000 + 90'000);
  EXPECT_TRUE(absl::StartsWith(table, "ID      NAME   STATE"));
  EXPECT_TRUE(absl::StrContains(
      table, "job-7   mlp    RUNNING   4       50/100   0.4322   1         -           90s"))
      << table;
  EXPECT_TRUE(absl::StrContains(table, "1         alice       90s")) << table;
  // A job that reads its losses every few steps has none to show before the first read.
  v1::Job unread = RunningJob();
  unread.mutable_progress()->set_step(3);
  unread.mutable_progress()->set_loss(0);
  unread.mutable_progress()->set_loss_step(0);
  const std::string before_read = FormatJobTable({Summarize(unread)}, 1'000'000);
  const std::vector<std::string> row = absl::StrSplit(
      std::vector<std::string>(absl::StrSplit(before_read, '\n'))[1], ' ', absl::SkipEmpty());
  ASSERT_GE(row.size(), 6u) << before_read;
  EXPECT_EQ(row[4], "3/100") << before_read;
  EXPECT_EQ(row[5], "-") << before_read;
}

TEST(Format, ACompactedJobSaysSo) {
  v1::Job job = RunningJob();  // as the state file keeps it once compacted: no spec
  job.set_restarts(2);
  job.clear_spec();
  job.mutable_spec()->set_name("mlp");  // its name alone is kept
  job.set_state(v1::SUCCEEDED);
  job.set_compacted(true);
  job.set_submitter("alice");
  job.set_uid("5f1c0a9e5f1c0a9e5f1c0a9e5f1c0a9e");
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description, "Submitter:  alice\n")) << description;
  EXPECT_TRUE(absl::StrContains(description, "Uid:        5f1c0a9e5f1c0a9e5f1c0a9e5f1c0a9e\n"))
      << description;
  EXPECT_TRUE(absl::StrContains(description, "Progress:   50/100 steps, loss 0.4322\n"))
      << description;
  EXPECT_TRUE(absl::StrContains(description, "Compacted:  it ended longer ago")) << description;
  EXPECT_FALSE(absl::StrContains(description, "Spec:")) << description;
  EXPECT_TRUE(absl::StrContains(description, "Name:       mlp\n")) << description;
  // What only the spec said is not made up from its defaults.
  EXPECT_TRUE(absl::StrContains(description, "(restarts 2)\n")) << description;
  EXPECT_FALSE(absl::StrContains(description, "Joining:")) << description;
}

TEST(Format, EventsLeftOutOfTheRecordAreCountedWhereTheyWere) {
  v1::Job job = RunningJob();
  job.clear_events();
  for (const char* message : {"submitted", "attempt 1 scheduled", "heal 4000"}) {
    job.add_events()->set_message(message);
  }
  job.set_events_omitted(3997);
  job.set_events_omitted_after(2);
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description,
                                "attempt 1 scheduled\n  ... 3997 events left out here (the "
                                "coordinator's state file keeps them)\n"))
      << description;
  EXPECT_TRUE(absl::StrContains(description, "heal 4000\n")) << description;
}

TEST(Format, ADescriptionShowsTheSubmittersFolders) {
  v1::Job job = RunningJob();
  job.set_submitter("alice");
  EXPECT_FALSE(absl::StrContains(FormatJobDescription(job, 1'000'000), "Folders:"));
  v1::SubmitterRoots* roots = job.mutable_submitter_roots();
  roots->set_principal("alice");
  roots->add_input_roots("/data/shared");
  roots->add_input_roots("/data/alice");
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description,
                                "Folders:    reads under /data/shared, /data/alice; writes under "
                                "nothing (alice's, with the coordinator's)\n"))
      << description;
}

TEST(Format, ADescriptionShowsTheInitialCheckpointEveryAttemptStartsFrom) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_init()->set_checkpoint_dir("/ckpt/base");
  EXPECT_FALSE(absl::StrContains(FormatJobDescription(job, 1'000'000), "Starts at:"));
  job.set_init_checkpoint_step(40);
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(
      absl::StrContains(description, "Starts at:  step 40 of /ckpt/base (init.checkpoint_dir)\n"))
      << description;
}

TEST(Format, ADescriptionShowsTheCheckpointARestartResumesFrom) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_output()->set_checkpoint_dir("/ckpt/job-7");
  EXPECT_FALSE(absl::StrContains(FormatJobDescription(job, 1'000'000), "Checkpoint:"));
  job.set_checkpoint_step(40);
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description,
                                "Checkpoint: step 40 in /ckpt/job-7 (output.checkpoint_dir)\n"))
      << description;
  job.mutable_spec()->clear_output();  // compacted: no folder to name
  EXPECT_FALSE(absl::StrContains(FormatJobDescription(job, 1'000'000), "Checkpoint:"));
}

TEST(Format, SummaryShowsLossFirstToLast) {
  v1::Job job = RunningJob();
  job.set_state(v1::SUCCEEDED);
  job.set_reason("done");
  job.mutable_spec()->mutable_output()->set_final_model_path("/m.safetensors");
  const std::string summary = FormatJobSummary(job);
  EXPECT_TRUE(absl::StrContains(summary, "job-7 SUCCEEDED: done")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "loss:   2.5000 -> 0.4322")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "model:  /m.safetensors")) << summary;
}

TEST(Format, DescriptionShowsPrecisionHookSwitchesAndLossScale) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::FP16);
  job.mutable_spec()->mutable_grad_scaler()->set_enabled(true);
  v1::GradScalerState* scaler = job.mutable_progress()->mutable_grad_scaler();
  scaler->set_scale(16384);
  scaler->set_skipped_steps(2);
  scaler->set_growth_tracker(7);
  v1::HookSwitch* applied = job.add_hook_switches();
  applied->set_version(1);
  applied->mutable_new_hook()->set_hook(v1::CommHook::FP16_COMPRESS);
  applied->set_step(30);
  applied->set_state(v1::HookSwitch::APPLIED);
  v1::HookSwitch* abandoned = job.add_hook_switches();
  abandoned->set_version(2);
  *abandoned->mutable_old_hook() = applied->new_hook();
  abandoned->mutable_new_hook()->set_hook(v1::CommHook::NO_HOOK);
  abandoned->set_step(41);
  abandoned->set_state(v1::HookSwitch::ABANDONED);
  abandoned->set_reason("rank 1 (worker w1) had already started step 42");
  job.mutable_memory_per_rank()->set_parameters_bytes(int64_t{3} << 20);
  job.mutable_memory_per_rank()->set_total_bytes(int64_t{3} << 20);
  job.mutable_progress()->set_peak_allocated_bytes(int64_t{5} << 19);
  job.mutable_progress()->set_peak_reserved_bytes(int64_t{7} << 19);
  const std::string text = FormatJobDescription(job, 1'000'000);
  for (const char* line :
       {"Precision:  params FP16, reduction FP16, optimizer sees FP32 gradients\n",
        "Memory:     about 3.0 MiB (parameters 3.0 MiB, gradients 0 B, optimizer state 0 B, "
        "activations 0 B, data 0 B) per rank (estimated)\n",
        "Peak:       2.5 MiB allocated, 3.5 MiB reserved on rank 0 so far\n",
        "Comm hook:  FP16_COMPRESS (from step 30, switch 1)\n",
        "Loss scale: 16384 (2 steps skipped for inf/NaN, 7 clean steps since the last change)\n",
        "  1  NO_HOOK -> FP16_COMPRESS at step 30  APPLIED\n",
        "  2  FP16_COMPRESS -> NO_HOOK at step 41  ABANDONED: rank 1 (worker w1) had already "
        "started step 42\n"}) {
    EXPECT_TRUE(absl::StrContains(text, line)) << "missing: " << line << "\nin:\n" << text;
  }
}

// A fault-tolerant job that lost a group trains on with fewer ranks: the progress line,
// the description and the closing summary say how many and which; a job without fault
// tolerance says what a lost rank does to it.
TEST(Format, ADegradedJobShowsItsLiveRanksEverywhere) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_fault_tolerance()->set_min_replicas(1);
  v1::Membership* membership = job.mutable_membership();
  membership->set_attempt(1);
  membership->set_epoch(1);
  for (int rank : {0, 1}) membership->add_live_ranks(rank);
  for (int rank : {2, 3}) membership->add_left_ranks(rank);
  v1::MembershipEpoch* lost = job.add_membership_history();
  lost->set_attempt(1);
  lost->set_epoch(1);
  lost->add_live_ranks(0);
  lost->add_live_ranks(1);
  lost->set_decided_at_step(39);
  lost->set_first_step(40);
  lost->set_cause("rank 3 (worker w3) was lost");
  for (int rank = 0; rank < 4; ++rank) {
    v1::RankAssignment* assigned = job.add_ranks();
    assigned->set_rank(rank);
    assigned->set_worker_id(absl::StrCat("w", rank));
  }
  EXPECT_EQ(FormatProgressLine(job, 10),
            "[#####.....] 50/100 steps  loss 0.4322  12.50 steps/s  RUNNING  2/4 ranks (epoch 1)");
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description,
                                "  rank 1  worker w1\n  rank 2  worker w2  (left "
                                "the attempt)\n"))
      << description;
  EXPECT_TRUE(absl::StrContains(
      description, "Replicas:   epoch 1: 2 of 4 ranks train (0, 1); ranks 2, 3 left\n"))
      << description;
  EXPECT_TRUE(
      absl::StrContains(description,
                        "  attempt 1  epoch 1 from step 40 (decided at step 39): ranks 0, 1  "
                        "(rank 3 (worker w3) was lost)\n"))
      << description;
  job.set_target_replicas(1);
  EXPECT_TRUE(absl::StrContains(FormatJobDescription(job, 1'000'000),
                                "            scaled to 1 replica group (shardwise scale)\n"));
  job.set_state(v1::SUCCEEDED);
  EXPECT_TRUE(absl::StrContains(FormatJobSummary(job),
                                "replicas: ranks 0, 1 trained to the end; ranks 2, 3 left "
                                "(epoch 1, 1 membership change)\n"))
      << FormatJobSummary(job);
  // Healed: every rank trains again, the history says how it came to.
  membership->set_epoch(2);
  membership->add_live_ranks(2);
  membership->add_live_ranks(3);
  membership->clear_left_ranks();
  *job.add_membership_history() = *lost;
  job.mutable_membership_history(1)->set_epoch(2);
  job.mutable_membership_history(1)->set_cause("a replacement for ranks 2, 3 joins");
  EXPECT_TRUE(absl::StrContains(FormatJobDescription(job, 1'000'000),
                                "Replicas:   epoch 2: 4 of 4 ranks train (0, 1, 2, 3)\n"))
      << FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(FormatJobSummary(job),
                                "replicas: ranks 0, 1, 2, 3 trained to the end (epoch 2, 2 "
                                "membership changes)\n"))
      << FormatJobSummary(job);
  // A membership of an earlier attempt: the current one trains whole, and the history of
  // the attempt before is still shown.
  job.set_attempt(2);
  EXPECT_FALSE(absl::StrContains(FormatProgressLine(job, 10), "ranks (epoch"));
  EXPECT_TRUE(
      absl::StrContains(FormatJobDescription(job, 1'000'000), "  attempt 1  epoch 2 from step 40"))
      << FormatJobDescription(job, 1'000'000);
  // An epoch decided that never trained says so.
  job.mutable_membership_history(1)->clear_first_step();
  EXPECT_TRUE(absl::StrContains(FormatJobDescription(job, 1'000'000),
                                "  attempt 1  epoch 2 (decided at step 39; not trained)"))
      << FormatJobDescription(job, 1'000'000);
}

// Epochs a long-healing job's record left out (server/job_record_bound.h) are counted
// where they were, and among its membership changes.
TEST(Format, MembershipEpochsLeftOutOfTheRecordAreCountedWhereTheyWere) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_fault_tolerance()->set_min_replicas(1);
  job.set_state(v1::SUCCEEDED);
  job.mutable_membership()->set_attempt(1);
  job.mutable_membership()->set_epoch(302);
  for (int epoch : {1, 302}) {
    v1::MembershipEpoch* entry = job.add_membership_history();
    entry->set_attempt(1);
    entry->set_epoch(epoch);
    entry->set_cause(absl::StrCat("change ", epoch));
  }
  job.set_membership_epochs_omitted(300);
  job.set_membership_epochs_omitted_after(1);
  const std::string description = FormatJobDescription(job, 1'000'000);
  EXPECT_TRUE(absl::StrContains(description,
                                "(change 1)\n  ... 300 epochs omitted (their decisions and first "
                                "steps are among the job's events) ...\n"))
      << description;
  EXPECT_TRUE(absl::StrContains(description, "epoch 302 (decided at step 0; not trained)"))
      << description;
  EXPECT_TRUE(absl::StrContains(FormatJobSummary(job), "(epoch 302, 302 membership changes)\n"))
      << FormatJobSummary(job);
}

// A job without fault tolerance says what a lost rank does to it; one that may grow says
// how far, and that its first world_size ranks train.
TEST(Format, AJobWithoutFaultToleranceOrThatMayGrowSaysSo) {
  v1::Job plain = RunningJob();
  plain.mutable_spec()->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  EXPECT_TRUE(absl::StrContains(FormatJobDescription(plain, 1'000'000),
                                "Replicas:   no fault tolerance: a lost rank fails the attempt "
                                "(no other rank holds its shard); restart_policy re-queues it "
                                "from its newest checkpoint\n"));
  // A job that may grow, at the start of an attempt: the first world_size of its ranks
  // train, and nothing has changed yet.
  v1::Job growing = RunningJob();
  growing.mutable_spec()->set_world_size(2);
  growing.mutable_spec()->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  growing.mutable_spec()->mutable_fsdp()->set_shard_group_size(2);
  growing.mutable_spec()->mutable_fault_tolerance()->set_max_replicas(3);
  const std::string grows = FormatJobDescription(growing, 1'000'000);
  EXPECT_TRUE(absl::StrContains(grows,
                                "Replicas:   epoch 0: 2 of 6 ranks train (0, 1)\n"
                                "            started with 1 replica group (world_size 2), grows "
                                "to at most 3 (fault_tolerance.max_replicas)\n"))
      << grows;
  EXPECT_FALSE(absl::StrContains(grows, "Membership history:")) << grows;
}

TEST(Format, WorkerTableShowsEachCudaWorkersGpu) {
  v1::WorkerInfo cpu;
  cpu.set_id("cpu-0");
  cpu.set_device(v1::CPU);
  cpu.set_state(v1::IDLE);
  v1::WorkerInfo gpu = cpu;
  gpu.set_id("gpu-0");
  gpu.set_device(v1::CUDA);
  gpu.mutable_gpu()->set_index(3);
  gpu.mutable_gpu()->set_name("NVIDIA H100 80GB HBM3");
  gpu.mutable_gpu()->set_memory_bytes(int64_t{85017493504});
  gpu.mutable_gpu()->set_compute_capability_major(9);
  gpu.mutable_gpu()->set_nccl_version("2.28.3");
  gpu.mutable_gpu()->set_cudnn_version("9.19.0");
  const std::string table = FormatWorkerTable({cpu, gpu}, 0);
  EXPECT_NE(table.find("3: NVIDIA H100 80GB HBM3, 79 GiB, sm_90, NCCL 2.28.3, cuDNN 9.19.0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("GPU"), std::string::npos) << table;
}

TEST(Format, WorkerTableSaysWhyAndHowLongAWorkerIsQuarantined) {
  v1::WorkerInfo w;
  w.set_id("w1");
  w.set_state(v1::IDLE);
  w.set_quarantined_until_ms(600'000);
  w.set_quarantine_reason("rank 1 of job-1 attempt 1 did not reach the rendezvous");
  EXPECT_TRUE(absl::StrContains(
      FormatWorkerTable({w}, 0),
      "quarantined for 10m more: rank 1 of job-1 attempt 1 did not reach the rendezvous"));
  EXPECT_FALSE(absl::StrContains(FormatWorkerTable({w}, 600'000), "quarantined"));
}

TEST(Format, WorkerTableShowsAWorkersOwnFolders) {
  v1::WorkerInfo w;
  w.set_id("w1");
  w.mutable_folders()->add_input_roots("/data");
  w.mutable_folders()->add_input_roots("/mnt/data");
  w.mutable_folders()->add_output_roots("/data/out");
  w.add_features("submitter-folders");
  w.set_data_plane_version(3);
  EXPECT_TRUE(
      absl::StrContains(FormatWorkerTable({w}, 0), "read /data, /mnt/data; write /data/out"));
  EXPECT_TRUE(absl::StrContains(FormatWorkerTable({w}, 0), "submitter-folders   v3 "));
  w.clear_folders();
  EXPECT_FALSE(absl::StrContains(FormatWorkerTable({w}, 0), "read "));
}

TEST(Format, WorkerTableShowsTheMessagesItsHeartbeatsSayItRead) {
  v1::WorkerInfo w;
  w.set_id("w1");
  EXPECT_TRUE(absl::StrContains(FormatWorkerTable({w}, 0), "0s ago           -      "))
      << FormatWorkerTable({w}, 0);  // nothing sent, nothing counted
  w.set_session_messages_sent(3);
  EXPECT_TRUE(absl::StrContains(FormatWorkerTable({w}, 0), " ? of 3 "))
      << FormatWorkerTable({w}, 0);
  w.set_session_messages_read(2);
  EXPECT_TRUE(absl::StrContains(FormatWorkerTable({w}, 0), " 2 of 3 "))
      << FormatWorkerTable({w}, 0);
}

TEST(Format, DescribeShowsTheJoinTimeout) {
  v1::Job job = RunningJob();
  job.mutable_spec()->mutable_rendezvous()->set_join_timeout_seconds(45);
  EXPECT_TRUE(absl::StrContains(FormatJobDescription(job, 1'000'000),
                                "Joining:    every rank within 45 s of scheduling"));
}

TEST(Format, Ages) {
  EXPECT_EQ(FormatAge(0, 59'000), "59s");
  EXPECT_EQ(FormatAge(0, 600'000), "10m");
  EXPECT_EQ(FormatAge(0, int64_t{3} * 3600'000), "3h");
  EXPECT_EQ(FormatAge(0, 3 * 86400'000LL), "3d");
  EXPECT_EQ(FormatAge(10, 0), "0s");
}

}  // namespace
}  // namespace shardwise
