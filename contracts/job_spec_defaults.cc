#include "contracts/job_spec_defaults.h"

#include "contracts/dtype_rules.h"
#include "contracts/transformer_config.h"

namespace shardwise {

void ApplyJobSpecDefaults(v1::JobSpec* spec) {
  v1::ModelSpec* model = spec->mutable_model();
  if (model->has_gpt()) {
    v1::GptConfig* gpt = model->mutable_gpt();
    if (gpt->activation() == v1::ACTIVATION_UNSPECIFIED) gpt->set_activation(v1::GELU);
    if (!gpt->has_bias()) gpt->set_bias(true);
    if (gpt->attention() == v1::GptConfig::ATTENTION_UNSPECIFIED) {
      gpt->set_attention(v1::GptConfig::MATERIALIZED);
    }
    if (spec->wrap().modules().empty()) spec->mutable_wrap()->add_modules(v1::WrapModule::BLOCK);
  } else if (model->has_llama()) {
    *model->mutable_llama() = WithLlamaDefaults(model->llama());
    if (spec->wrap().modules().empty()) spec->mutable_wrap()->add_modules(v1::WrapModule::BLOCK);
  } else {
    if (model->activation() == v1::ACTIVATION_UNSPECIFIED) model->set_activation(v1::RELU);
    if (!model->has_bias()) model->set_bias(true);
    if (spec->wrap().layers_per_unit() == 0) spec->mutable_wrap()->set_layers_per_unit(1);
  }

  v1::FsdpConfig* fsdp = spec->mutable_fsdp();
  if (fsdp->sharding_strategy() == v1::ShardingStrategy::SHARDING_STRATEGY_UNSPECIFIED) {
    fsdp->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  }
  if (fsdp->backward_prefetch() == v1::BackwardPrefetch::BACKWARD_PREFETCH_UNSPECIFIED) {
    fsdp->set_backward_prefetch(v1::BackwardPrefetch::BACKWARD_PRE);
  }
  if (!fsdp->has_limit_all_gathers()) fsdp->set_limit_all_gathers(true);
  // Order matters: the reduce dtype's default depends on param_dtype as the user gave it.
  v1::MixedPrecision* mp = fsdp->mutable_mixed_precision();
  const v1::Dtype reduce = EffectiveReduceDtype(*mp);
  mp->set_param_dtype(EffectiveParamDtype(*mp));
  mp->set_reduce_dtype(reduce);

  if (spec->optimizer().has_adamw()) {
    v1::AdamWOptions* adamw = spec->mutable_optimizer()->mutable_adamw();
    if (!adamw->has_lr()) adamw->set_lr(1e-3);
    if (!adamw->has_beta1()) adamw->set_beta1(0.9);
    if (!adamw->has_beta2()) adamw->set_beta2(0.999);
    if (!adamw->has_eps()) adamw->set_eps(1e-8);
    if (!adamw->has_weight_decay()) adamw->set_weight_decay(1e-2);
  }

  const v1::LrSchedule& schedule = spec->optimizer().lr_schedule();
  if (schedule.decay() != v1::LrSchedule::CONSTANT && schedule.decay_steps() == 0) {
    spec->mutable_optimizer()->mutable_lr_schedule()->set_decay_steps(spec->steps());
  }
  if (spec->data().has_tokens() && !spec->data().tokens().val_path().empty() &&
      spec->evaluation().batches() == 0) {
    spec->mutable_evaluation()->set_batches(kDefaultEvalBatches);
  }

  if (spec->loss() == v1::LOSS_UNSPECIFIED) spec->set_loss(v1::CROSS_ENTROPY);
  if (spec->data().has_synthetic() && spec->data().synthetic().num_samples() == 0) {
    spec->mutable_data()->mutable_synthetic()->set_num_samples(kDefaultSyntheticSamples);
  }
  if (spec->gradient_accumulation_steps() == 0) spec->set_gradient_accumulation_steps(1);
  if (spec->loss_read_interval_steps() == 0) spec->set_loss_read_interval_steps(1);
  if (spec->rendezvous().join_timeout_seconds() == 0) {
    spec->mutable_rendezvous()->set_join_timeout_seconds(kDefaultJoinTimeoutSeconds);
  }
  if (spec->device() == v1::DEVICE_KIND_UNSPECIFIED) spec->set_device(v1::CPU);
  if (spec->device() == v1::CUDA &&
      spec->cuda().collectives() == v1::CudaOptions::COLLECTIVES_UNSPECIFIED) {
    spec->mutable_cuda()->set_collectives(v1::CudaOptions::NCCL);
  }
  if (spec->init().source_case() == v1::InitSpec::SOURCE_NOT_SET) {
    spec->mutable_init()->set_seed(0);
  }
}

}  // namespace shardwise
