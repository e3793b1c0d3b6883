// A tandem checkpoint of toy_ddp's model loads in PyTorch (safetensors +
// load_state_dict) and predicts the same; a PyTorch-saved file loads into
// tandem and predicts the same. The PyTorch half is
// train/examples/safetensors_interop.py, run with /usr/bin/python3; without
// PyTorch or the safetensors package the test skips, saying so.
#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/checkpoint/safetensors.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

namespace tandem::train {
namespace {

// The tutorial's training and test points.
Tensor Inputs() {
  return *Tensor::FromVector<float>(
      {-1.2f, 3.1f, -0.9f, 2.9f, -0.5f, 2.6f, 2.3f, -1.1f, 2.7f, -1.5f, -0.8f,
       2.8f, 2.6f, -1.6f},
      {7, 2});
}

Tensor Logits(nn::Module& model, const Tensor& inputs) {
  NoGradGuard no_grad;
  absl::StatusOr<Tensor> out = model.Forward(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Tensor();
}

TEST(SafetensorsInteropTest, TandemToPyTorchAndBack) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/interop";
  EXPECT_EQ(
      std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
      0);

  // toy_ddp's checkpoint after its 3 epochs on 2 simulated ranks.
  ToyDdpConfig config;
  config.checkpoint.dir = dir + "/run";
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  ASSERT_TRUE(sim::Run(
                  2,
                  [&](int, comm::Communicator& comm) {
                    return RunToyDdp(comm, config);
                  },
                  options)
                  .ok());
  const std::string model_path =
      config.checkpoint.dir + "/" + checkpoint::kModelFile;
  Generator gen(1);
  std::unique_ptr<nn::Module> model = *BuildToyModel(gen);
  ASSERT_TRUE(checkpoint::LoadModuleFromSafetensors(model_path, *model).ok());
  const Tensor inputs = Inputs();
  ASSERT_TRUE(checkpoint::SaveSafetensors(
                  dir + "/tandem_logits.safetensors",
                  {{"inputs", inputs}, {"logits", Logits(*model, inputs)}})
                  .ok());

  const std::string command =
      "/usr/bin/python3 train/examples/safetensors_interop.py '" + model_path +
      "' '" + dir + "/tandem_logits.safetensors' '" + dir + "'";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw)) << command;
  if (WEXITSTATUS(raw) == 77) {
    GTEST_SKIP() << "PyTorch or the safetensors package is missing for "
                    "/usr/bin/python3 (see the line above); not checked";
  }
  ASSERT_EQ(WEXITSTATUS(raw), 0) << command;

  // PyTorch's file into tandem: same logits (same tolerance as the script).
  std::unique_ptr<nn::Module> theirs = *BuildToyModel(gen);
  ASSERT_TRUE(checkpoint::LoadModuleFromSafetensors(
                  dir + "/torch_model.safetensors", *theirs)
                  .ok());
  absl::StatusOr<checkpoint::SafetensorsContent> want =
      checkpoint::LoadSafetensors(dir + "/torch_logits.safetensors");
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<float> expected;
  for (const nn::NamedTensor& nt : want->tensors) {
    if (nt.name == "logits") expected = *nt.tensor.ToVector<float>();
  }
  const std::vector<float> got = *Logits(*theirs, inputs).ToVector<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-6 + 1e-5 * std::abs(expected[i]))
        << "logit " << i;
  }
  for (size_t row = 0; row < got.size() / 2; ++row) {
    EXPECT_EQ(got[2 * row] > got[2 * row + 1],
              expected[2 * row] > expected[2 * row + 1])
        << "prediction " << row;
  }
}

}  // namespace
}  // namespace tandem::train
