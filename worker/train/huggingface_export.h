#ifndef SHARDWISE_WORKER_TRAIN_HUGGINGFACE_EXPORT_H_
#define SHARDWISE_WORKER_TRAIN_HUGGINGFACE_EXPORT_H_

// The final model in Hugging Face's layout (output.huggingface_dir): model.safetensors
// (FP32, HF's names; contracts/huggingface_layout.h) and config.json, for
// LlamaForCausalLM / GPT2LMHeadModel.from_pretrained(dir); with the job's tokenizer
// (data.tokens.tokenizer) in the files AutoTokenizer.from_pretrained(dir) reads and
// generation_config.json with its BOS and EOS ids. Files there are replaced only
// when the spec says output.overwrite or the model there names this job
// (final_model_owner.h), as for the final model itself.

#include <string>

#include "absl/status/status.h"
#include "contracts/job_identity.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"
#include "worker/data/huggingface_weights.h"

namespace shardwise {

// Writes the job's final weights, from `model` (asked for each parameter in
// HuggingFaceWriteOrder's order, worker/data/huggingface_weights.h), into
// spec.output().huggingface_dir(), a path the path policy has checked; nothing when it is
// empty. The weights name `job` and `attempt` as their writer (final_model_owner.h).
absl::Status ExportHuggingFace(const v1::JobSpec& spec, ParameterSource model,
                               const JobIdentity& job, int32_t attempt);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_HUGGINGFACE_EXPORT_H_
