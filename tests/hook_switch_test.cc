// Changing a running job's communication hook through the coordinator, end to end: the
// CLI asks, the coordinator picks a step no rank has reached, every worker process
// switches there, `describe` shows it, and the model equals, bit for bit, a run told from
// the start to switch at that step. Hooks the job cannot use are refused and the job goes
// on unchanged.

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "proto/job_service.grpc.pb.h"
#include "tests/cluster.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"

namespace shardwise::testing {
namespace {

v1::JobSpec SwitchSpec(const std::string& model_path) {
  v1::JobSpec spec = Cluster::Spec(2);
  spec.mutable_model()->clear_layer_widths();
  for (int w : {32, 128, 64, 8}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  spec.set_global_batch_size(32);
  spec.set_steps(800);
  spec.mutable_output()->set_final_model_path(model_path);
  return spec;
}

v1::CommHook Hook(v1::CommHook::Hook hook) {
  v1::CommHook h;
  h.set_hook(hook);
  return h;
}

// Refused, and nothing changes: an unknown hook (by the CLI), a hook the strategy cannot
// use and an enum value no hook has (by the coordinator, naming the request's).
void ExpectUnusableHooksRefused(Cluster& cluster, const std::string& job_id) {
  const std::string coordinator = "--coordinator=" + cluster.address();
  std::string output;
  EXPECT_EQ(Cluster::RunCli({coordinator, "set-hook", job_id, "bogus"}, &output), 2) << output;
  EXPECT_TRUE(absl::StrContains(output, "unknown hook 'bogus'")) << output;
  auto refused = cluster.client().SetCommHook(job_id, Hook(v1::CommHook::ALLREDUCE));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "needs fsdp.sharding_strategy NO_SHARD, got FULL_SHARD"))
      << refused.status();
  refused = cluster.client().SetCommHook(job_id, Hook(static_cast<v1::CommHook::Hook>(42)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "hook.hook: unknown value 42"))
      << refused.status();
  refused = cluster.client().SetCommHook(job_id, Hook(v1::CommHook::NO_HOOK));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "already uses NO_HOOK"));
}

TEST(HookSwitch, SetHookSwitchesEveryRankAtTheChosenStep) {
  ClusterOptions options;
  options.hook_switch_lead_ms = 300;
  Cluster cluster(options);
  cluster.StartCoordinator();
  // Both ranks hold at step 10 until the switch is agreed (ranks answer proposals while
  // they hold): the job cannot end before it, however fast or loaded the machine.
  const std::string release = cluster.dir() + "/release";
  Process& w0 = cluster.AddWorker("w0", {"--fault_injection=hold_at=10:forward:" + release});
  Process& w1 = cluster.AddWorker("w1", {"--fault_injection=hold_at=10:forward:" + release});
  const std::string path = cluster.dir() + "/switched.safetensors";
  const v1::JobSpec spec = SwitchSpec(path);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        return absl::StrContains(ReadWholeFile(w0.log_path()), "held at forward of step 10") &&
               absl::StrContains(ReadWholeFile(w1.log_path()), "held at forward of step 10");
      },
      absl::Seconds(60)))
      << "the job did not start training";

  const std::string coordinator = "--coordinator=" + cluster.address();
  std::string output;
  ExpectUnusableHooksRefused(cluster, *job_id);

  ASSERT_EQ(Cluster::RunCli({coordinator, "set-hook", *job_id, "bf16_compress"}, &output), 0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "comm hook switched to BF16_COMPRESS at step")) << output;
  std::ofstream(release).put('\n');

  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  // Held, no rank could pass the proposed step before every rank accepted it: the first
  // proposal applies.
  ASSERT_EQ(job.hook_switches_size(), 1) << job.DebugString();
  const v1::HookSwitch& applied = job.hook_switches(0);
  EXPECT_EQ(applied.state(), v1::HookSwitch::APPLIED);
  EXPECT_EQ(applied.new_hook().hook(), v1::CommHook::BF16_COMPRESS);
  EXPECT_GT(applied.step(), 10);
  EXPECT_LT(applied.step(), spec.steps());
  EXPECT_EQ(job.progress().comm_hook().hook(), v1::CommHook::BF16_COMPRESS);

  ASSERT_EQ(Cluster::RunCli({coordinator, "describe", *job_id}, &output), 0) << output;
  EXPECT_TRUE(
      absl::StrContains(output, absl::StrCat("Comm hook:  BF16_COMPRESS (from step ",
                                             applied.step(), ", switch ", applied.version(), ")")))
      << output;
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat(applied.version(), "  NO_HOOK -> BF16_COMPRESS at step ", applied.step(),
                           "  APPLIED")))
      << output;
  // The job has ended: no more switches; the CLI says so with 2 (a refusal), not 1 (which
  // says a switch was abandoned).
  EXPECT_EQ(Cluster::RunCli({coordinator, "set-hook", *job_id, "fp16_compress"}, &output), 2);

  // The same job, told from the start to switch at that step, in threads.
  v1::JobSpec configured = spec;
  configured.mutable_output()->set_final_model_path(cluster.dir() + "/configured.safetensors");
  ThreadedOptions at_step;
  at_step.hook_switches = {{applied.step(), Hook(v1::CommHook::BF16_COMPRESS)}};
  auto run = TrainInThreads(configured, at_step);
  ASSERT_TRUE(run.ok()) << run.status();
  auto switched = ReadSafetensors(path);
  auto reference = ReadSafetensors(configured.output().final_model_path());
  ASSERT_TRUE(switched.ok() && reference.ok());
  EXPECT_TRUE(ModelsClose(*switched, *reference, 0, 0));
}

}  // namespace
}  // namespace shardwise::testing
