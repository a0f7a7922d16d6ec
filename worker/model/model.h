#ifndef SHARDWISE_WORKER_MODEL_MODEL_H_
#define SHARDWISE_WORKER_MODEL_MODEL_H_

// A model that computes: the stages of a job's ModelDescription, in order, and its loss.
// It knows the math and which parameter each stage reads, never where parameters live:
// the caller (the FSDP runtime, or the sampler) binds them per stage (ParameterTable).
//
// A micro-step: Begin(batch), Forward(s) for every stage in order, Loss(scale), then
// Backward(s) in reverse, End(). An evaluation: Begin, Forward and DropSaved per stage,
// Loss, End. The caller may run its own work (unshard, reduce) between the calls.
//
// What a model keeps between micro-steps (the Llama's rotary tables) is allocated on the
// device of its first Begin and freed when the model goes: that device's allocator must
// outlive the model.
//
// Thread-safety: none; one rank's training thread.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/model_description.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/device.h"
#include "worker/data/batch.h"
#include "worker/model/loss.h"
#include "worker/model/stage.h"

namespace shardwise::model {

class Model {
 public:
  // The stages of `description` (which must describe spec.model()), each checkpointed
  // where spec.activation_checkpointing asks and the stage allows, and spec.loss.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const v1::JobSpec& spec,
                                                       const ModelDescription& description);

  int num_stages() const { return static_cast<int>(stages_.size()); }

  // Starts a micro-step on `batch`: its inputs are copied to `device`; activations are
  // rounded to `compute` (param_dtype).
  void Begin(const MicroBatch& batch, Device* device, ScalarType compute);
  void Forward(int stage, const ParameterTable& params);
  void DropSaved(int stage) { stages_[stage]->DropSaved(); }
  // Writes the micro-batch's loss times `scale` to `loss` (a device double, not waited
  // for), from the last stage's output; its gradient starts the backward.
  void Loss(float scale, double* loss);
  void Backward(int stage, const ParameterTable& params);
  // The last stage's output (logits) after the forward, before Loss.
  const Buffer& output() const { return flow_.hidden; }
  // Frees the batch and whatever the stages still keep.
  void End();

 private:
  Model(std::vector<std::unique_ptr<Stage>> stages, std::unique_ptr<model::Loss> loss)
      : stages_(std::move(stages)), loss_(std::move(loss)) {}
  StageContext Context(const ParameterTable* params) const;

  const std::vector<std::unique_ptr<Stage>> stages_;
  const std::unique_ptr<model::Loss> loss_;
  Device* device_ = nullptr;
  ScalarType compute_ = ScalarType::kFloat32;
  DeviceBatch batch_;
  Flow flow_;
};

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_MODEL_H_
