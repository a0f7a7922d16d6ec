#ifndef SHARDWISE_WORKER_DATA_HUGGINGFACE_WEIGHTS_H_
#define SHARDWISE_WORKER_DATA_HUGGINGFACE_WEIGHTS_H_

// A transformer's weights from and to Hugging Face's layout (contracts/huggingface_layout.h
// has the names): read from a checkpoint (init.huggingface), each tensor widened to FP32
// (BF16 and F16 exactly), GPT-2's Conv1D weights transposed and Meta's interleaved q and k
// rows put in HF's rotate-half order; and written for from_pretrained
// (output.huggingface_dir).

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "contracts/safetensors.h"
#include "contracts/weights_file.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// The model's parameters by its own state-dict names, given to `receiver` one at a time,
// what it wants of each (contracts/weights_file.h): each file opened once, of each tensor
// only the stored rows that hold the wanted elements read (GPT-2's transposed Conv1D
// weights whole), so a rank's host holds its shards, one tensor's wanted part and its
// stored bytes. INVALID_ARGUMENT naming the field and the key as LocateHuggingFaceTensors
// does, NOT_FOUND or DATA_LOSS for a file that cannot be read.
absl::Status ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                    const v1::HuggingFaceCheckpoint& checkpoint,
                                    ParameterReceiver& receiver);
// The same, collected.
absl::StatusOr<TensorMap> ReadHuggingFaceWeights(const v1::ModelSpec& model,
                                                 const v1::HuggingFaceCheckpoint& checkpoint);

// `weights` (the model's, FP32) as HF's layout holds them: keyed by HF's names, GPT-2's
// Conv1D weights transposed; the tied head is the embedding's (not repeated).
absl::StatusOr<TensorMap> ToHuggingFaceLayout(const v1::ModelSpec& model, const TensorMap& weights);
// The same written to `path` (WriteSafetensors' bytes for ToHuggingFaceLayout's map),
// without a second model in memory: a tensor at a time, only a transposed one copied.
absl::Status WriteInHuggingFaceLayout(const std::string& path, const v1::ModelSpec& model,
                                      const TensorMap& weights, const Metadata& metadata,
                                      bool replace);

// Where a writer takes the model's tensors from, one parameter (by its state-dict name) at
// a time, in the order the writer states (fsdp::FullModelStream: the final model, never
// whole on the host).
using ParameterSource = absl::FunctionRef<absl::StatusOr<HostTensor>(const std::string& param)>;

// The model's parameters in the order WriteInHuggingFaceLayout asks its source for them
// (the file's, by HF's names).
absl::StatusOr<std::vector<std::string>> HuggingFaceWriteOrder(const v1::ModelSpec& model);

// WriteInHuggingFaceLayout with the tensors from `source` (the same bytes), asked for in
// HuggingFaceWriteOrder's order; its error (or INTERNAL for a tensor of another size than
// the model's) stops the write and is returned.
absl::Status WriteInHuggingFaceLayout(const std::string& path, const v1::ModelSpec& model,
                                      ParameterSource source, const Metadata& metadata,
                                      bool replace);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_HUGGINGFACE_WEIGHTS_H_
