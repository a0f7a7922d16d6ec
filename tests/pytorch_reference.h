#ifndef SHARDWISE_TESTS_PYTORCH_REFERENCE_H_
#define SHARDWISE_TESTS_PYTORCH_REFERENCE_H_

// Running the PyTorch references of tests/pytorch/ (Debian's python3-torch, CPU) and
// comparing Shardwise's results with theirs: what the GPT's and the Llama's parity tests
// share. Each reference reads one JSON configuration (tests/pytorch/reference_training.py
// lists its keys), writes the trained weights as safetensors and the losses as JSON.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"

namespace shardwise::testing {

// This test process's folder for inputs and outputs (under TEST_TMPDIR), made once.
std::string ScratchDir();

// The GPL-3 text every Debian system ships, as bytes for tokens (uint16), at `path`; once.
absl::Status WriteTextTokens(const std::string& path);

// The training both sides run, without its model: AdamW (lr 2e-3, betas 0.9 and 0.95, eps
// 1e-8, weight decay 0.1 on matrices), clipping at norm 1, 4 warmup steps then a cosine to
// 2e-4 over `steps`, 8 sequences per step from ScratchDir()/train.bin (seed 3), the
// initial weights from `init`.
v1::JobSpec ReferenceJob(int steps, const std::string& init);

// The reference's configuration for `job` (its training fields), with the model's
// configuration `model_json` (a JSON object; empty: none, the reference takes a checkpoint's),
// in `dtype` ("fp32", "bf16"), writing NAME's outputs (RunPytorch); `extra` adds keys
// ("\"key\": value, ..."), e.g. init_hf_dir and out_hf_dir.
std::string ReferenceConfig(const v1::JobSpec& job, const std::string& model_json,
                            const std::string& dtype, const std::string& name,
                            const std::string& extra = "");

struct PytorchRun {
  TensorMap model;
  std::vector<double> losses;
};

// Runs `script` (a path under the runfiles, e.g. "tests/pytorch/llama.py") on
// `config_json`, saved as ScratchDir()/NAME.json; the configuration's out_model and
// out_losses must be ScratchDir()/NAME.safetensors and ScratchDir()/NAME.losses.json.
absl::StatusOr<PytorchRun> RunPytorch(const std::string& script, const std::string& name,
                                      const std::string& config_json);

// `train(key)`, run once per key for every case that compares with it (gtest runs cases
// one at a time: the cache needs no lock).
template <typename Key, typename Train>
const absl::StatusOr<PytorchRun>& RunOncePerKey(const Key& key, Train train) {
  static auto* runs = new std::map<Key, absl::StatusOr<PytorchRun>>();
  auto it = runs->find(key);
  if (it == runs->end()) it = runs->emplace(key, train(key)).first;
  return it->second;
}

// The largest |got - want| / (atol + rtol |want|) over every element of `want` (1 is the
// bound), and where.
struct Worst {
  double ratio = 0;
  std::string where;
};
Worst CompareElementwise(const TensorMap& got, const TensorMap& want, double rtol, double atol);

// The largest |got - want| / want over the steps (`got` must have want's length).
double WorstLossRatio(const std::vector<double>& got, const std::vector<double>& want);

// Shardwise's run (its final `model` and each step's `losses`) against the reference's, as
// gtest expectations: every parameter within rtol 1e-5 / atol 1e-5, every loss within
// `loss_rtol` relative. The margins are recorded as the test's properties and printed
// under `label`.
void ExpectMatchesPytorch(const std::string& label, const TensorMap& model,
                          const std::vector<double>& losses, const PytorchRun& reference,
                          double loss_rtol);

// The reference `script`, given `job` with no step and `extra` keys (init_hf_dir naming an
// export, ...), holds exactly `model`'s tensors (a gtest expectation).
void ExpectPytorchHoldsExactly(const std::string& script, const std::string& name, v1::JobSpec job,
                               const std::string& extra, const TensorMap& model);

}  // namespace shardwise::testing

#endif  // SHARDWISE_TESTS_PYTORCH_REFERENCE_H_
