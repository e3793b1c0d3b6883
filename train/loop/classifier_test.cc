// The classifier helpers around the loop, with a model whose predictions
// are known: Linear(2, 2) with the identity weight and no bias predicts the
// larger feature's index.
//   - AddClassifierSums adds loss x rows, rows and right predictions;
//     ClassifierEpochReport divides them;
//   - HeldOutScore scores every rank's slice, leaves the model in eval mode
//     and writes the score to the monitor's metrics once (rank 0);
//   - PrintTutorialAccuracies prints the f32 accuracies in Python's repr,
//     and an empty shard is an error naming the example, the rank and the
//     set.
#include "train/loop/classifier.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "train/loop/eval_testing.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A loop over the identity model that never trains (lr 0).
absl::StatusOr<std::unique_ptr<TrainingLoop>> Loop(comm::Communicator& comm,
                                                   nn::Module& model,
                                                   int64_t epochs) {
  LoopOptions options;
  options.who = "classifier_test";
  options.epochs = epochs;
  return TrainingLoop::Create(comm, model, ShardMode::kNone, SgdFactory(0.0),
                              options);
}

TEST(ClassifierTest, SumsAndTheirReport) {
  EXPECT_THAT(ClassifierSums(),
              ElementsAre(std::string("loss"), std::string("count"),
                          std::string("correct")));
  Batch batch;
  ASSERT_TRUE(
      (batch.labels = *Tensor::FromVector<int64_t>({0, 1, 1})).defined());
  StepView step;
  step.batch = &batch;
  // Rows 0 and 2 predicted right (argmax 0, 1), row 1 wrong.
  step.output = *Tensor::FromVector<float>({3, 1, 2, 0, 0, 5}, {3, 2});
  step.loss = 0.25;
  std::vector<double> sums = {1.0, 4.0, 2.0};
  step.sums = &sums;
  ASSERT_TRUE(AddClassifierSums(step).ok());
  EXPECT_THAT(sums, ElementsAre(1.75, 7.0, 4.0));
  const EpochReport report = ClassifierEpochReport(sums);
  EXPECT_EQ(report.train_loss, 0.25);
  EXPECT_EQ(report.train_accuracy, 4.0 / 7.0);
  EXPECT_EQ(report.samples, 7);
}

TEST(ClassifierTest, HeldOutScoreScoresEveryRankAndReportsOnce) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/held_out.jsonl");
  std::filesystem::remove(path);
  RunMonitor monitor(
      {.name = "test", .progress = ProgressMode::kOff, .metrics_path = path});
  {
    ScopedActiveRunMonitor active(&monitor);
    sim::RunResult r =
        sim::Run(3, [](int, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(TensorDataset data, SevenRows());
          TANDEM_ASSIGN_OR_RETURN(auto model, IdentityLinear());
          TANDEM_ASSIGN_OR_RETURN(auto loop, Loop(comm, *model, 1));
          TANDEM_ASSIGN_OR_RETURN(Score score, HeldOutScore(*loop, data));
          EXPECT_EQ(score.correct, 5);
          EXPECT_EQ(score.total, 7);
          EXPECT_FALSE(model->is_training());
          return absl::OkStatus();
        });
    ASSERT_TRUE(r.status().ok()) << r.status();
  }
  ASSERT_TRUE(monitor.Finish().ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string metrics = text.str();
  EXPECT_THAT(metrics, HasSubstr("\"kind\":\"test\""));
  EXPECT_THAT(metrics, HasSubstr("\"correct\":5,\"total\":7"));
  // One line: rank 0 reports, the others do not.
  EXPECT_EQ(metrics.find("\"kind\":\"test\""),
            metrics.rfind("\"kind\":\"test\""));
}

TEST(ClassifierTest, TutorialAccuraciesPrintPythonFloats) {
  sim::RunResult r =
      sim::Run(1, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, SevenRows());
        TANDEM_ASSIGN_OR_RETURN(auto model, IdentityLinear());
        TANDEM_ASSIGN_OR_RETURN(auto loop, Loop(comm, *model, 0));
        // Batches of 3 with drop_last: 6 of the 7 rows in the sampler's
        // order are scored for training; the test set is all 7 rows.
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches train,
            SampledBatches::Create(data, comm, 3, /*drop_last=*/true));
        std::vector<std::string> lines;
        TANDEM_RETURN_IF_ERROR(PrintTutorialAccuracies(
            *loop, train, data, [&](int64_t, const std::string& line) {
              lines.push_back(line);
              return absl::OkStatus();
            }));
        EXPECT_FALSE(model->is_training());
        EXPECT_EQ(lines.size(), 2u);
        if (lines.size() == 2) {
          EXPECT_THAT(lines[0], HasSubstr("Training accuracy 0."));
          // 5 / 7 in f32, widened: Python prints 0.7142857313156128.
          EXPECT_EQ(lines[1], "Test accuracy 0.7142857313156128");
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

TEST(ClassifierTest, AnEmptyShardNamesTheExampleRankAndSet) {
  sim::RunResult r = sim::Run(2, [](int, comm::Communicator& comm) {
    absl::StatusOr<TensorDataset> data = SevenRows();
    absl::StatusOr<std::unique_ptr<nn::Linear>> model = IdentityLinear();
    if (!data.ok() || !model.ok()) return absl::InternalError("setup");
    absl::StatusOr<std::unique_ptr<TrainingLoop>> loop = Loop(comm, **model, 1);
    if (!loop.ok()) return loop.status();
    // 4 rows per rank, fewer than one batch of 5.
    absl::StatusOr<SampledBatches> train =
        SampledBatches::Create(*data, comm, 5, /*drop_last=*/true);
    if (!train.ok()) return train.status();
    return PrintTutorialAccuracies(
        **loop, *train, *data,
        [](int64_t, const std::string&) { return absl::OkStatus(); });
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(r.ranks[rank].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(r.ranks[rank].message(),
                HasSubstr(absl::StrCat("classifier_test on rank ", rank,
                                       ": the training accuracy has no "
                                       "examples to average")));
  }
}

}  // namespace
}  // namespace tandem::train
