// data_parallel_demo: the DataParallel tutorial's SimpleModel (Linear(10, 10)
// trained with MSE and SGD) wrapped in DataParallel over simulated devices,
// printing what ran on which device and what moved between them.
//
//   ./bazelw run //train:data_parallel_demo -- --devices=4 --batch_size=30
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/sim_device/sim_device.h"
#include "train/demos/sim_devices_flag.h"
#include "train/parallel/devices/data_parallel.h"

ABSL_FLAG(int64_t, batch_size, 30, "Rows per batch, 1..65536.");
ABSL_FLAG(int64_t, steps, 3, "Training steps, 1..1000000.");
// The demo holds a batch of 10 floats per row on each device: bounded, so
// a mistyped size is a usage error, not an allocation that aborts.
constexpr int64_t kMaxBatch = 65536;
constexpr int64_t kMaxSteps = 1000000;

namespace tandem::train {
namespace {

// The lines the replicas print, sorted by device after each forward (the
// replicas run concurrently, so their order would vary).
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
};

// The tutorial's Model: Linear(10, 10) that reports what it saw.
class SimpleModel : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<nn::Module>> Create(Log* log) {
    Generator gen(0);
    auto m = std::unique_ptr<SimpleModel>(new SimpleModel(log));
    TANDEM_ASSIGN_OR_RETURN(
        m->fc_, m->RegisterModule("fc", nn::Linear::Create(10, 10, gen)));
    return std::unique_ptr<nn::Module>(std::move(m));
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    TANDEM_ASSIGN_OR_RETURN(Tensor y, fc_->Forward(x));
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->lines.push_back(absl::StrCat(
        x.device().index(), "\t", "  In Model: input ",
        ShapeToString(x.shape()), " on ", x.device().ToString(), ", output ",
        ShapeToString(y.shape()), " on ", y.device().ToString()));
    return y;
  }
  std::string_view type_name() const override { return "Model"; }

 private:
  explicit SimpleModel(Log* log) : log_(log) {}
  Log* log_;
  nn::Linear* fc_ = nullptr;
};

absl::Status Run(int64_t devices, int64_t batch, int64_t steps) {
  Log log;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model,
                          SimpleModel::Create(&log));
  TANDEM_RETURN_IF_ERROR(model->To(Device::Sim(0)));
  std::vector<Device> ids;
  for (int64_t i = 0; i < devices; ++i) ids.push_back(Device::Sim(i));
  std::cout << "Let's use " << devices << " simulated devices!\n";
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DataParallel> dp,
      DataParallel::Create(std::move(model),
                           [&log] { return SimpleModel::Create(&log); },
                           {.device_ids = ids}));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(dp->Parameters(), 0.001));
  Generator gen(1);
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<float> xv(static_cast<size_t>(batch * 10));
    for (size_t i = 0; i < xv.size(); ++i) {
      xv[i] = static_cast<float>((i * 37 + step * 11) % 97) / 97.f - 0.5f;
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector(xv, {batch, 10}));
    TANDEM_ASSIGN_OR_RETURN(x, x.To(Device::Sim(0)));
    TANDEM_ASSIGN_OR_RETURN(
        Tensor target, Tensor::Zeros({batch, 10}, DType::kF32, Device::Sim(0)));
    ResetSimCopyCounters();
    log.lines.clear();
    dp->ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor y, dp->Forward(x));
    // "<device index>\t<line>": in device order (the replicas ran
    // concurrently, in no fixed order).
    std::sort(log.lines.begin(), log.lines.end(),
              [](const std::string& a, const std::string& b) {
                return std::stoll(a) < std::stoll(b);
              });
    for (const std::string& line : log.lines) {
      std::cout << line.substr(line.find('\t') + 1) << "\n";
    }
    std::cout << "Outside: input " << ShapeToString(x.shape()) << " on "
              << x.device().ToString() << ", output "
              << ShapeToString(y.shape()) << " on " << y.device().ToString()
              << " (" << dp->last_replica_count() << " replicas ran)\n";
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, target));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_RETURN_IF_ERROR(sgd.Step());
    TANDEM_ASSIGN_OR_RETURN(double l, loss.Item());
    std::cout << "step " << step << ": loss " << l << "; bytes copied:";
    for (const SimCopyCount& c : SimCopyCounters()) {
      if (c.from == c.to) continue;  // autograd's same-device copies
      std::cout << " " << c.from.ToString() << "->" << c.to.ToString() << " "
                << c.bytes;
    }
    std::cout << "\n";
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem::train

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "data_parallel_demo",
           .summary = "torch.nn.DataParallel's tutorial on simulated devices: "
                      "Linear(10, 10), MSE, SGD; prints what ran where.",
           .flag_folders = {"train/demos/"},
           .help_epilogue = "Example: data_parallel_demo --devices=4 "
                            "--batch_size=30"},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch_size);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  if (batch < 1 || batch > kMaxBatch || steps < 1 || steps > kMaxSteps) {
    std::cerr << "data_parallel_demo: --batch_size must be in 1.." << kMaxBatch
              << " and --steps in 1.." << kMaxSteps << " (got batch_size "
              << batch << ", steps " << steps << ")\n";
    return tandem::kExitUsageError;
  }
  absl::StatusOr<int64_t> devices = tandem::train::InstallDevicesFromFlag(2);
  if (!devices.ok()) {
    std::cerr << "data_parallel_demo: " << devices.status().message() << "\n";
    return tandem::kExitUsageError;
  }
  absl::Status s = tandem::train::Run(*devices, batch, steps);
  if (!s.ok()) {
    std::cerr << "data_parallel_demo: " << s.message() << "\n";
    return tandem::kExitRuntimeError;
  }
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("data_parallel_demo")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("data_parallel_demo", Run(argc, argv));
}
