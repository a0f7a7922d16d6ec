#include "tests/pytorch_reference.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/scratch.h"
#include "common/testing/worst_error.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace shardwise::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kText[] = "/usr/share/common-licenses/GPL-3";

std::string ReadText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

std::string ScratchDir() {
  static const std::string dir = [] {
    std::string d = testing::ScratchPath("pytorch-parity");
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

absl::Status WriteTextTokens(const std::string& path) {
  if (std::filesystem::exists(path)) return absl::OkStatus();
  const std::string bytes = ReadText(kText);
  if (bytes.size() < 1000) return absl::FailedPreconditionError(absl::StrCat("no text at ", kText));
  std::vector<uint16_t> ids;
  for (unsigned char c : bytes) ids.push_back(c);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()),
             static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
  return absl::OkStatus();
}

v1::JobSpec ReferenceJob(int steps, const std::string& init) {
  v1::JobSpec spec;
  v1::OptimizerSpec* optimizer = spec.mutable_optimizer();
  optimizer->mutable_adamw()->set_lr(2e-3);
  optimizer->mutable_adamw()->set_weight_decay(0.1);
  optimizer->mutable_adamw()->set_beta2(0.95);
  optimizer->set_weight_decay_params(v1::WeightDecayParams::MATRICES);
  optimizer->set_max_grad_norm(1.0);
  v1::LrSchedule* schedule = optimizer->mutable_lr_schedule();
  schedule->set_decay(v1::LrSchedule::COSINE);
  schedule->set_warmup_steps(4);
  schedule->set_decay_steps(steps);
  schedule->set_min_lr(2e-4);
  spec.mutable_data()->mutable_tokens()->set_train_path(ScratchDir() + "/train.bin");
  spec.mutable_data()->mutable_tokens()->set_seed(3);
  spec.mutable_init()->set_safetensors_path(init);
  spec.set_global_batch_size(8);
  spec.set_steps(steps);
  return spec;
}

std::string ReferenceConfig(const v1::JobSpec& job, const std::string& model_json,
                            const std::string& dtype, const std::string& name,
                            const std::string& extra) {
  const v1::AdamWOptions& adamw = job.optimizer().adamw();
  const v1::LrSchedule& schedule = job.optimizer().lr_schedule();
  const std::string base = absl::StrCat(ScratchDir(), "/", name);
  return absl::StrFormat(
      R"({%s"init": "%s", "train": "%s", "seed": %d, "global_batch": %d,
    "accumulation": %d, "steps": %d, "dtype": "%s", "lr": %.17g, "beta1": %.17g,
    "beta2": %.17g, "eps": %.17g, "weight_decay": %.17g, "decay_params": "%s",
    "max_grad_norm": %.17g, "schedule": {"decay": "%s", "warmup_steps": %d,
    "decay_steps": %d, "min_lr": %.17g},
    "out_model": "%s.safetensors", "out_losses": "%s.losses.json"%s})",
      model_json.empty() ? "" : absl::StrCat("\"model\": ", model_json, ", "),
      job.init().safetensors_path(), job.data().tokens().train_path(), job.data().tokens().seed(),
      job.global_batch_size(), std::max(1, job.gradient_accumulation_steps()), job.steps(), dtype,
      adamw.lr(), adamw.has_beta1() ? adamw.beta1() : 0.9, adamw.beta2(),
      adamw.has_eps() ? adamw.eps() : 1e-8, adamw.weight_decay(),
      v1::WeightDecayParams::Value_Name(job.optimizer().weight_decay_params()),
      job.optimizer().max_grad_norm(), v1::LrSchedule::Decay_Name(schedule.decay()),
      schedule.warmup_steps(), schedule.decay_steps(), schedule.min_lr(), base, base,
      extra.empty() ? "" : absl::StrCat(", ", extra));
}

absl::StatusOr<PytorchRun> RunPytorch(const std::string& script, const std::string& name,
                                      const std::string& config_json) {
  const std::string base = absl::StrCat(ScratchDir(), "/", name);
  std::ofstream(base + ".json") << config_json;
  const std::string command =
      absl::StrCat(kPython, " ", script, " ", base, ".json 2>", base, ".log");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("PyTorch failed (", command, "): ", ReadText(base + ".log")));
  }
  PytorchRun run;
  auto model = ReadSafetensors(base + ".safetensors");
  if (!model.ok()) return model.status();
  run.model = std::move(*model);
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(ReadText(base + ".losses.json"), &parsed).ok()) {
    return absl::InternalError(absl::StrCat("unreadable losses in ", base, ".losses.json"));
  }
  for (const auto& v : parsed.fields().at("losses").list_value().values()) {
    run.losses.push_back(v.number_value());
  }
  return run;
}

Worst CompareElementwise(const TensorMap& got, const TensorMap& want, double rtol, double atol) {
  if (want.empty()) return {1e30, "no tensor in the reference"};
  Worst worst;
  for (const auto& [name, expected] : want) {
    auto it = got.find(name);
    if (it == got.end()) return {1e30, absl::StrCat("no tensor ", name)};
    if (it->second.numel() != expected.numel()) return {1e30, absl::StrCat("shape of ", name)};
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const double w = expected.f32()[i], g = it->second.f32()[i];
      // A NaN is the worst there is (WorseOf): a model gone NaN passes no bound.
      const double ratio = WorseOf(0, std::abs(g - w) / (atol + rtol * std::abs(w)));
      if (ratio > worst.ratio) worst = {ratio, absl::StrCat(name, "[", i, "]: ", g, " vs ", w)};
    }
  }
  return worst;
}

double WorstLossRatio(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t s = 0; s < want.size() && s < got.size(); ++s) {
    worst = WorseOf(worst, std::abs(got[s] - want[s]) / want[s]);
  }
  return got.size() == want.size() && !want.empty() ? worst : 1e30;
}

void ExpectMatchesPytorch(const std::string& label, const TensorMap& model,
                          const std::vector<double>& losses, const PytorchRun& reference,
                          double loss_rtol) {
  const Worst worst = CompareElementwise(model, reference.model, 1e-5, 1e-5);
  EXPECT_LE(worst.ratio, 1.0) << label << ": " << worst.where;
  const double worst_loss = WorstLossRatio(losses, reference.losses);
  EXPECT_LE(worst_loss, loss_rtol) << label;
  ::testing::Test::RecordProperty("worst_parameter_ratio", absl::StrFormat("%.3g", worst.ratio));
  ::testing::Test::RecordProperty("worst_loss_ratio", absl::StrFormat("%.3g", worst_loss));
  std::printf(
      "%s: parameters at %.3g of the bound (rtol 1e-5, atol 1e-5), losses within %.3g; "
      "loss %.4f -> %.4f\n",
      label.c_str(), worst.ratio, worst_loss, losses.empty() ? 0.0 : losses.front(),
      losses.empty() ? 0.0 : losses.back());
}

void ExpectPytorchHoldsExactly(const std::string& script, const std::string& name, v1::JobSpec job,
                               const std::string& extra, const TensorMap& model) {
  job.set_steps(0);
  auto loaded = RunPytorch(script, name, ReferenceConfig(job, "", "fp32", name, extra));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->model.size(), model.size());
  EXPECT_EQ(CompareElementwise(loaded->model, model, 0, 1e-30).ratio, 0.0);
}

}  // namespace shardwise::testing
