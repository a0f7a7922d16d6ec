#include "worker/trainer.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/solo_communicator.h"
#include "worker/comm/tracked_communicator.h"
#include "worker/compute/cpu_device.h"
#include "worker/compute/cpu_math.h"
#include "worker/data/dataset.h"
#include "worker/data/weights.h"
#include "worker/fsdp/checkpoint.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/fsdp/grad_scaler.h"
#include "worker/runtime/critical_path.h"

namespace shardwise {
namespace {

// A group's host communicator: `world` when the group is the world (with a null `world`,
// a connection of its own even then), none needed for a group of one, else a new Gloo
// context over the attempt's rendezvous.
absl::StatusOr<Communicator*> GroupCommunicator(
    const RankDeviceRequest::Group& group, const TrainingContext& context, Communicator* world,
    std::vector<std::unique_ptr<Communicator>>* owned) {
  if (world != nullptr && static_cast<int>(group.ranks.size()) == context.world_size) {
    return world;
  }
  if (group.ranks.size() == 1) {
    owned->push_back(std::make_unique<SoloCommunicator>());
    return owned->back().get();
  }
  ASSIGN_OR_RETURN(auto connected,
                   GlooCommunicator::ConnectGroup(*context.store, group.name, group.ranks,
                                                  context.rank, context.data_plane));
  owned->push_back(std::move(connected));
  return owned->back().get();
}

// Where this rank's parameters come from: the job's own newest checkpoint when a later
// attempt resumes, else init.checkpoint_dir's newest, else none (seed or safetensors).
absl::StatusOr<std::optional<fsdp::LoadedCheckpoint>> CheckpointToLoad(
    const v1::JobSpec& spec, const TrainingContext& context) {
  const std::string& own = spec.output().checkpoint_dir();
  if (context.attempt > 1 && !own.empty()) {
    auto folder = fsdp::FindLatestCheckpoint(own, context.job_id);
    if (folder.ok()) return fsdp::LoadCheckpoint(*folder, spec);
    if (!absl::IsNotFound(folder.status())) return folder.status();
  }
  if (spec.init().has_checkpoint_dir()) {
    ASSIGN_OR_RETURN(std::string folder,
                     fsdp::FindLatestCheckpoint(spec.init().checkpoint_dir(), ""));
    return fsdp::LoadCheckpoint(folder, spec);
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<TrainingFaults> ParseTrainingFaults(const std::string& text) {
  TrainingFaults faults;
  if (text.empty()) return faults;
  int64_t from = 0;
  absl::string_view rest = text;
  if (text != "unit_order_reversed" &&
      !(absl::ConsumePrefix(&rest, "unit_order_reversed_from=") && absl::SimpleAtoi(rest, &from))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fault_injection: unknown fault '", text,
        "' (expected unit_order_reversed or unit_order_reversed_from=STEP)"));
  }
  faults.alter_execution_order = [from](int64_t step, v1::ExecutionOrder* order) {
    if (step < from) return;
    std::reverse(order->mutable_pre_forward()->begin(), order->mutable_pre_forward()->end());
    std::reverse(order->mutable_post_forward()->begin(), order->mutable_post_forward()->end());
  };
  return faults;
}

std::string TrainingResult::Summary() const {
  std::string summary = absl::StrFormat("trained %d steps: loss %.4f -> %.4f, %.2f steps/s", steps,
                                        first_loss, last_loss, steps_per_second);
  if (resumed_from_step >= 0) {
    absl::StrAppend(&summary, "; resumed from the checkpoint of step ", resumed_from_step);
  }
  if (checkpoints_written > 0) absl::StrAppend(&summary, "; ", checkpoints_written, " checkpoints");
  if (!model_path.empty()) absl::StrAppend(&summary, "; model written to ", model_path);
  return summary;
}

absl::StatusOr<TrainingResult> Train(const v1::JobSpec& spec, const TrainingContext& context,
                                     const TrainingFaults& faults) {
  cpu::SetBlasThreads(1);
  ASSIGN_OR_RETURN(fsdp::ShardingPlan plan,
                   fsdp::PlanSharding(spec.fsdp(), context.world_size, context.rank));
  GlooCommunicator world(context.world);
  std::vector<std::unique_ptr<Communicator>> owned;
  // The rank's groups (ranks in group order, a name unique within the attempt) and their
  // host communicators. `unshard` is the shard group again, over a connection of its own
  // even when the group is the world: the model's all-gathers run on a thread of their
  // own beside its reductions (fsdp_model.h).
  RankDeviceRequest::Group shard{plan.ShardGroupRanks(),
                                 absl::StrCat("shard", plan.replicate_rank)};
  RankDeviceRequest::Group replicate{plan.ReplicateGroupRanks(),
                                     absl::StrCat("replicate", plan.shard_rank)};
  RankDeviceRequest::Group unshard{shard.ranks, absl::StrCat("unshard", plan.replicate_rank)};
  ASSIGN_OR_RETURN(shard.host, GroupCommunicator(shard, context, &world, &owned));
  ASSIGN_OR_RETURN(replicate.host, GroupCommunicator(replicate, context, &world, &owned));
  ASSIGN_OR_RETURN(unshard.host, GroupCommunicator(unshard, context, /*world=*/nullptr, &owned));
  Communicator* const shard_group = shard.host;
  Communicator* const replicate_group = replicate.host;
  Communicator* const unshard_group = unshard.host;

  // With a position or a timeline to keep, every collective records itself there.
  std::vector<std::unique_ptr<TrackedCommunicator>> tracked;
  auto track = [&](Communicator* group) -> Communicator* {
    if (context.position == nullptr && context.timeline == nullptr) return group;
    tracked.push_back(
        std::make_unique<TrackedCommunicator>(group, context.position, context.timeline));
    return tracked.back().get();
  };
  Communicator* const world_group = track(&world);
  Communicator* const shard_comm = shard_group == &world ? world_group : track(shard_group);
  Communicator* const replicate_comm =
      replicate_group == &world ? world_group : track(replicate_group);
  Communicator* const unshard_comm = track(unshard_group);

  ASSIGN_OR_RETURN(Dataset data, LoadDataset(spec));
  ASSIGN_OR_RETURN(std::optional<fsdp::LoadedCheckpoint> checkpoint, CheckpointToLoad(spec, context));
  TensorMap initial;
  if (checkpoint.has_value()) {
    initial = std::move(checkpoint->model);
  } else {
    ASSIGN_OR_RETURN(initial, InitialWeights(spec));
  }
  // The model's device and the communicators of its groups: the CPU and the Gloo groups
  // above, or an accelerator and its own communicators (declared before the model: it
  // outlives it).
  CpuDevice cpu_device(context.allocator);
  Device* device = &cpu_device;
  Communicator* model_shard = shard_comm;
  Communicator* model_replicate = replicate_comm;
  Communicator* model_unshard = unshard_comm;
  std::unique_ptr<RankDevice> accelerator;
  if (spec.device() == v1::CUDA) {
    if (!context.make_device) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job.device is ", v1::DeviceKind_Name(spec.device()),
          ", but this worker was built without support for it (build with --config=cuda)"));
    }
    RankDeviceRequest request;
    request.spec = &spec;
    request.rank = context.rank;
    request.shard = shard;
    request.replicate = replicate;
    request.unshard = unshard;
    request.store = context.store;
    request.timeout = absl::FromChrono(context.data_plane.timeout);
    request.abort = context.abort;
    ASSIGN_OR_RETURN(accelerator, context.make_device(request));
    device = accelerator->device.get();
    model_shard = track(accelerator->shard);
    model_replicate = track(accelerator->replicate);
    model_unshard = accelerator->unshard != nullptr ? track(accelerator->unshard) : nullptr;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<fsdp::FsdpModel> model,
                   fsdp::FsdpModel::Create(spec, plan,
                                           {model_shard, model_replicate, model_unshard},
                                           device, initial));
  model->set_position(context.position);
  model->set_timeline(context.timeline);
  model->set_delays(faults.compute_delay, faults.communication_delay);
  initial.clear();
  std::unique_ptr<fsdp::Optimizer> optimizer =
      fsdp::Optimizer::Create(spec.optimizer(), model->num_units(), device);
  RETURN_IF_ERROR(model->EnableOptimizerOverlap(optimizer.get()));
  fsdp::GradScaler scaler(spec.grad_scaler());
  TrainingResult result;
  int64_t first_step = 0;
  if (checkpoint.has_value()) {
    const bool resuming = checkpoint->manifest.job_id() == context.job_id &&
                          !context.job_id.empty() && context.attempt > 1;
    if (resuming) {
      first_step = checkpoint->manifest.step();
      result.resumed_from_step = first_step;
      // The loss scale goes on from where the job was (not from init_scale).
      if (scaler.enabled()) scaler.Restore(checkpoint->manifest.grad_scaler());
    }
    // Optimizer state carries over only to an optimizer of the same kind.
    if (checkpoint->manifest.optimizer() == fsdp::OptimizerKind(spec.optimizer())) {
      optimizer->set_steps(checkpoint->manifest.optimizer_steps());
      for (int u = 0; u < static_cast<int>(checkpoint->optimizer_state.size()); ++u) {
        for (const auto& [name, full] : checkpoint->optimizer_state[u]) {
          const std::vector<float> shard = model->ShardOf(u, full);
          RETURN_IF_ERROR(optimizer->RestoreSegmentState(u, name, shard.data(), shard.size()));
        }
      }
    }
  }

  // Each group counts its own traffic; a group that is the world is counted once.
  std::vector<const Communicator*> groups = {&world};
  std::vector<const Communicator*> counted = {shard_group, replicate_group, unshard_group};
  if (accelerator != nullptr) {
    counted.push_back(accelerator->shard);
    counted.push_back(accelerator->replicate);
    counted.push_back(accelerator->unshard);
  }
  for (const Communicator* group : counted) {
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
  }
  auto traffic = [&groups] {
    CommStats total;
    for (const Communicator* group : groups) {
      total.all_gather_bytes += group->stats().all_gather_bytes;
      total.reduce_scatter_bytes += group->stats().reduce_scatter_bytes;
      total.all_reduce_bytes += group->stats().all_reduce_bytes;
    }
    return total;
  };

  const int micro_steps = std::max(1, spec.gradient_accumulation_steps());
  const bool classification = spec.loss() != v1::MSE;
  const int64_t in = data.input_width, out = data.target_width;
  const int64_t interval = spec.output().checkpoint_interval_steps();
  // This thread is the step's critical path: calls to the coordinator from here count.
  struct TrainingThreadMark {
    TrainingThreadMark() { on_training_thread = true; }
    ~TrainingThreadMark() { on_training_thread = false; }
  } mark;
  const int64_t calls_before_training = training_thread_coordinator_calls.load();
  int64_t calls_after_first_step = -1;  // the counter's value once the first step ended
  // The first micro-step's execution order, which later ones are compared with.
  std::optional<v1::ExecutionOrder> first_order;
  bool order_change_reported = false;
  int64_t plan_since_step = 1;  // a rank derives its first plan in the first step
  const absl::Time start = absl::Now();
  for (int64_t step = first_step; step < spec.steps(); ++step) {
    const absl::Time step_start = absl::Now();
    ScopedSpan step_span(context.timeline, "step", -1, step);
    if (context.abort != nullptr && context.abort->load()) {
      return absl::AbortedError(absl::StrCat("aborted at step ", step));
    }
    if (context.position != nullptr) {
      context.position->SetStep(step);
      context.position->SetPhase("step start");
    }
    if (context.hook_schedule != nullptr) {
      ASSIGN_OR_RETURN(std::optional<v1::CommHook> hook,
                       context.hook_schedule->HookForStep(step, context.abort));
      model->set_comm_hook(hook.value_or(spec.comm_hook()));
    }
    // The loss scaler multiplies the loss (and so every gradient) by its scale.
    const float loss_scale = (1.0f / micro_steps) * scaler.scale();
    double local_loss = 0;
    for (int micro = 0; micro < micro_steps; ++micro) {
      const std::vector<int64_t> rows =
          SampleRows(step, spec.global_batch_size(), context.world_size, context.rank, micro,
                     micro_steps, data.num_samples);
      const int64_t batch = static_cast<int64_t>(rows.size());
      std::vector<float> x(batch * in), targets;
      std::vector<int64_t> labels;
      for (int64_t i = 0; i < batch; ++i) {
        std::copy_n(data.x.data() + rows[i] * in, in, x.data() + i * in);
      }
      if (classification) {
        for (int64_t row : rows) labels.push_back(data.labels[row]);
      } else {
        targets.resize(batch * out);
        for (int64_t i = 0; i < batch; ++i) {
          std::copy_n(data.targets.data() + rows[i] * out, out, targets.data() + i * out);
        }
      }
      if (faults.corrupt_inputs) faults.corrupt_inputs(step, micro, &x);
      ASSIGN_OR_RETURN(double loss,
                       model->ForwardBackward(x.data(), labels.data(), targets.data(), batch,
                                              loss_scale, micro == micro_steps - 1));
      local_loss += loss / scaler.scale();
      v1::ExecutionOrder order = model->execution_order();
      if (faults.alter_execution_order) faults.alter_execution_order(step, &order);
      if (!first_order.has_value()) {
        first_order = order;
        if (context.on_execution_order) context.on_execution_order(order, step, false);
      } else if (!order_change_reported &&
                 !google::protobuf::util::MessageDifferencer::Equals(order, *first_order)) {
        order_change_reported = true;
        if (context.on_execution_order) context.on_execution_order(order, step, true);
      }
    }
    if (context.position != nullptr) context.position->SetPhase("step end");
    bool skip = faults.skip_steps.count(step) > 0;
    if (scaler.enabled()) {
      // Unscale before clipping; the found-inf flag is all-reduced so every rank skips
      // the same steps.
      ASSIGN_OR_RETURN(const bool overflow, model->UnscaleGradients(scaler.inverse_scale()));
      float found_inf = overflow ? 1.0f : 0.0f;
      RETURN_IF_ERROR(world_group->AllReduce(&found_inf, 1));
      skip = skip || found_inf > 0;
      scaler.Update(found_inf > 0);
    }
    if (skip) {
      model->DiscardGradients();
    } else {
      RETURN_IF_ERROR(
          model->OptimizerStep(*optimizer, spec.optimizer().max_grad_norm()).status());
    }

    // The loss of the whole global batch (the mean of the ranks' means) and, in the same
    // all-reduce, how many ranks hold a newer prefetch plan: when all do, every rank
    // follows it from the next step on.
    const int32_t plan_version =
        model->prefetch_plan().has_value() ? model->prefetch_plan()->version() : 0;
    const std::optional<v1::PrefetchPlan> newer_plan =
        context.plans != nullptr ? context.plans->NewerThan(plan_version) : std::nullopt;
    float reduced[2] = {static_cast<float>(local_loss), newer_plan.has_value() ? 1.0f : 0.0f};
    RETURN_IF_ERROR(world_group->AllReduce(reduced, 2));
    const float loss = reduced[0] / static_cast<float>(context.world_size);
    if (newer_plan.has_value() && reduced[1] == static_cast<float>(context.world_size)) {
      RETURN_IF_ERROR(model->set_prefetch_plan(*newer_plan));
      plan_since_step = step + 1;
    }
    if (step == first_step) result.first_loss = loss;
    result.last_loss = loss;
    result.steps = step + 1;
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    result.steps_per_second = elapsed > 0 ? (result.steps - first_step) / elapsed : 0;

    if (interval > 0 && result.steps % interval == 0) {
      const std::string& dir = spec.output().checkpoint_dir();
      RETURN_IF_ERROR(fsdp::WriteCheckpointShard(dir, result.steps, *model, *optimizer));
      RETURN_IF_ERROR(world_group->Barrier());  // every shard is on disk before the manifest
      if (context.rank == 0) {
        const v1::GradScalerState scaler_state = scaler.State();
        RETURN_IF_ERROR(fsdp::WriteCheckpointManifest(dir, result.steps, context.job_id, spec,
                                                      *model, *optimizer,
                                                      scaler.enabled() ? &scaler_state : nullptr));
      }
      ++result.checkpoints_written;
    }
    if (context.on_progress) {
      v1::Progress progress;
      progress.set_step(result.steps);
      progress.set_total_steps(spec.steps());
      progress.set_loss(result.last_loss);
      progress.set_first_loss(result.first_loss);
      progress.set_steps_per_second(result.steps_per_second);
      progress.set_phase("training");
      progress.set_step_seconds(absl::ToDoubleSeconds(absl::Now() - step_start));
      const CommStats bytes = traffic();
      progress.set_all_gather_bytes(bytes.all_gather_bytes);
      progress.set_reduce_scatter_bytes(bytes.reduce_scatter_bytes);
      progress.set_all_reduce_bytes(bytes.all_reduce_bytes);
      if (scaler.enabled()) *progress.mutable_grad_scaler() = scaler.State();
      *progress.mutable_comm_hook() = model->comm_hook();
      if (model->prefetch_plan().has_value()) {
        progress.set_prefetch_plan_version(model->prefetch_plan()->version());
        progress.set_prefetch_plan_since_step(plan_since_step);
      }
      const int64_t calls = training_thread_coordinator_calls.load();
      if (calls_after_first_step < 0) calls_after_first_step = calls;
      progress.set_first_step_coordinator_calls(calls_after_first_step - calls_before_training);
      progress.set_critical_path_coordinator_calls(calls - calls_after_first_step);
      context.on_progress(progress);
    }
  }

  ASSIGN_OR_RETURN(TensorMap final_model, model->GatherFullModel());
  const std::string& path = spec.output().final_model_path();
  if (context.rank == 0 && !path.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    RETURN_IF_ERROR(WriteSafetensors(path, final_model));
    result.model_path = path;
  }
  return result;
}

}  // namespace shardwise
