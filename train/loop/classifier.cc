#include "train/loop/classifier.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/py_repr.h"

namespace tandem::train {

std::vector<const char*> ClassifierSums() {
  return {"loss", "count", "correct"};
}

absl::Status AddClassifierSums(const StepView& step) {
  const int64_t n = step.batch->labels.numel();
  TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                          CountCorrect(step.output, step.batch->labels));
  std::vector<double>& sums = *step.sums;
  sums[0] += step.loss * n;
  sums[1] += n;
  sums[2] += static_cast<double>(correct);
  return absl::OkStatus();
}

EpochReport ClassifierEpochReport(const std::vector<double>& sums) {
  return {.train_loss = sums[0] / sums[1],
          .train_accuracy = sums[2] / sums[1],
          .samples = static_cast<int64_t>(sums[1])};
}

absl::StatusOr<Score> HeldOutScore(TrainingLoop& loop,
                                   const TensorDataset& data) {
  loop.model().Eval();
  TANDEM_ASSIGN_OR_RETURN(
      const Score score,
      StridedScore(loop.comm(), loop.strategy(), data, loop.options().device,
                   loop.options().autocast));
  loop.ReportTest(score);
  return score;
}

absl::Status PrintTutorialAccuracies(
    TrainingLoop& loop, SampledBatches& train, const TensorDataset& test,
    const std::function<absl::Status(int64_t rank, const std::string& line)>&
        print) {
  const LoopOptions& options = loop.options();
  const VirtualWorld& vw = loop.strategy().virtual_world();
  loop.model().Eval();
  TANDEM_RETURN_IF_ERROR(
      train.BeginEpoch(std::max<int64_t>(options.epochs - 1, 0)).status());
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader test_loader,
      DataLoader::Sequential(test, train.batch_size(), /*drop_last=*/false));
  for (int64_t v = 0; v < train.replicas(); ++v) {
    TANDEM_ASSIGN_OR_RETURN(const DataLoader* train_loader, train.loader(v));
    for (auto [which, loader] :
         {std::pair<std::string, const DataLoader*>{"Training", train_loader},
          {"Test", &test_loader}}) {
      TANDEM_ASSIGN_OR_RETURN(
          const float accuracy,
          LoaderAccuracy(
              loop.strategy(), *loader, options.device,
              absl::StrCat(options.who, " on rank ", vw.rank_of(v), ": the ",
                           absl::AsciiStrToLower(which),
                           " accuracy has no examples to average (the PyTorch "
                           "script raises ZeroDivisionError here): this rank's "
                           "shard holds fewer samples than one batch with "
                           "drop_last; lower --batch_size or --world_size")));
      TANDEM_RETURN_IF_ERROR(
          print(vw.rank_of(v),
                absl::StrCat(which, " accuracy ", nn::PyFloatRepr(accuracy))));
    }
  }
  return loop.printer().Flush();
}

}  // namespace tandem::train
