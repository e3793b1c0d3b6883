// FullyShardedDataParallel with FsdpOptions::unit_layers on a tiny GPT-2
// (tensor/nn/models/gpt.h): one unit per block of "transformer.h", the
// embeddings, final LayerNorm and tied head the root unit. Checked: the
// units' layout (the tied weight one member of the root), the weights
// bit for bit equal to DDP's after AdamW steps at 1, 2 and 3 ranks (the tied
// gradient summed once), that a block's parameters are freed while another
// block runs (what per-block wrapping saves), and the misuses.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/embedding.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/ops.h"
#include "tensor/optim/adamw.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/sharded/fsdp.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBlocks[] = "transformer.h";

nn::GptConfig TinyConfig() {
  nn::GptConfig c;
  c.vocab_size = 37;
  c.block_size = 8;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 10;
  return c;
}

absl::StatusOr<Tensor> Tokens(int64_t b, int64_t t, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> ids(static_cast<size_t>(b * t));
  for (int64_t& id : ids) {
    double u = 0;
    gen.Uniform(&u, 1, 0.0, 1.0);
    id = static_cast<int64_t>(u * 37) % 37;
  }
  return Tensor::FromVector(ids, {b, t});
}

absl::StatusOr<std::vector<float>> Concat(const nn::StateDict& state) {
  std::vector<float> out;
  for (const nn::NamedTensor& e : state) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, e.tensor.ToVector<float>());
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Two AdamW steps (weight decay on) of next-token loss on `world` ranks;
// every rank's final parameters.
absl::StatusOr<std::vector<std::vector<float>>> Train(int world, bool fsdp) {
  std::vector<std::vector<float>> out(world);
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(5);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                                nn::Gpt::Create(TinyConfig(), gen));
        std::unique_ptr<DistributedDataParallel> ddp;
        std::unique_ptr<FullyShardedDataParallel> sharded;
        std::vector<Tensor> params;
        if (fsdp) {
          TANDEM_ASSIGN_OR_RETURN(sharded,
                                  FullyShardedDataParallel::Create(
                                      *model, comm, {.unit_layers = kBlocks}));
          params = sharded->ShardParameters();
        } else {
          TANDEM_ASSIGN_OR_RETURN(
              ddp, DistributedDataParallel::Create(*model, comm));
          params = model->Parameters();
        }
        TANDEM_ASSIGN_OR_RETURN(
            optim::AdamW adam,
            optim::AdamW::Create(params, {.lr = 0.01, .weight_decay = 0.1}));
        for (int step = 0; step < 2; ++step) {
          adam.ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                  Tokens(2, 6, 100 + 10 * step + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor y,
                                  Tokens(2, 6, 500 + 10 * step + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor logits,
                                  fsdp ? sharded->Forward(x) : ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, nn::Gpt::Loss(logits, y));
          TANDEM_RETURN_IF_ERROR(fsdp ? sharded->Backward(loss)
                                      : ddp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(adam.Step());
        }
        nn::StateDict state;
        if (fsdp) {
          TANDEM_ASSIGN_OR_RETURN(state, sharded->FullStateDict());
        } else {
          state = model->StateDict();
        }
        TANDEM_ASSIGN_OR_RETURN(out[rank], Concat(state));
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return out;
}

TEST(FsdpNestedTest, OneUnitPerBlockAndTheRootHoldsTheTiedWeight) {
  sim::RunResult r = sim::Run(2, [](int, comm::Communicator& comm) {
    Generator gen(5);
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                            nn::Gpt::Create(TinyConfig(), gen));
    TANDEM_ASSIGN_OR_RETURN(
        auto fsdp, FullyShardedDataParallel::Create(*model, comm,
                                                    {.unit_layers = kBlocks}));
    const std::vector<FsdpUnitInfo>& units = fsdp->units();
    EXPECT_EQ(units.size(), 4u);
    EXPECT_EQ(units[0].layer, -1);
    EXPECT_THAT(
        units[0].parameter_names,
        ElementsAre("transformer.wte.weight", "transformer.wpe.weight",
                    "transformer.ln_f.weight", "transformer.ln_f.bias"));
    EXPECT_EQ(units[0].numel, 37 * 10 + 8 * 10 + 2 * 10);
    for (int64_t k = 0; k < 3; ++k) {
      EXPECT_EQ(units[k + 1].layer, k);
      EXPECT_EQ(units[k + 1].parameter_names.front(),
                absl::StrCat("transformer.h.", k, ".ln_1.weight"));
      EXPECT_EQ(units[k + 1].parameter_names.size(), 12u);
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

TEST(FsdpNestedTest, EqualsDdpBitForBit) {
  for (int world : {1, 2, 3}) {
    absl::StatusOr<std::vector<std::vector<float>>> ddp = Train(world, false);
    absl::StatusOr<std::vector<std::vector<float>>> fsdp = Train(world, true);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    ASSERT_TRUE(fsdp.ok()) << fsdp.status();
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ((*fsdp)[r].size(), (*ddp)[0].size());
      EXPECT_EQ((*fsdp)[r], (*ddp)[0]) << "world " << world << " rank " << r;
    }
  }
}

// Runs `inner` after calling `probe`: stands in for a block to look at what
// is gathered while that block runs.
class Probe : public nn::Module {
 public:
  Probe(std::unique_ptr<nn::Module> inner, std::function<void()> probe)
      : probe_(std::move(probe)) {
    inner_ = *RegisterModule("inner", std::move(inner));
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    probe_();
    return inner_->Forward(x);
  }
  std::string_view type_name() const override { return "Probe"; }

 private:
  nn::Module* inner_ = nullptr;
  std::function<void()> probe_;
};

bool Resident(const nn::Module& m) {
  return m.NamedParameters().front().tensor.storage()->is_allocated();
}

// While block 1 runs (prefetch off): block 1 and the root are gathered,
// blocks 0 and 2 are not: the whole model is never resident at once.
TEST(FsdpNestedTest, OnlyTheRunningBlockAndTheRootAreGathered) {
  sim::RunResult r =
      sim::Run(2, [](int, comm::Communicator& comm) -> absl::Status {
        Generator gen(5);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                                nn::Gpt::Create(TinyConfig(), gen));
        nn::GptTransformer* tr = model->transformer();
        nn::Module* blocks[3] = {tr->block(0), tr->block(1), tr->block(2)};
        auto* h = dynamic_cast<nn::Sequential*>(tr->NamedChildren()[3].second);
        if (h == nullptr) return absl::InternalError("no transformer.h");
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<nn::Module> block1,
            h->ReplaceChild("1", std::make_unique<nn::ReLU>()));
        std::vector<std::vector<bool>> seen;
        auto probe = std::make_unique<Probe>(std::move(block1), [&] {
          seen.push_back({Resident(*tr->wte()), Resident(*blocks[0]),
                          Resident(*blocks[1]), Resident(*blocks[2])});
        });
        TANDEM_RETURN_IF_ERROR(h->ReplaceChild("1", std::move(probe)).status());
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp,
            FullyShardedDataParallel::Create(
                *model, comm, {.prefetch = false, .unit_layers = kBlocks}));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tokens(2, 6, 1));
        TANDEM_ASSIGN_OR_RETURN(Tensor logits, fsdp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, nn::Gpt::Loss(logits, x));
        TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
        EXPECT_EQ(seen.size(), 1u);
        if (!seen.empty()) {
          EXPECT_THAT(seen[0], ElementsAre(true, false, true, false));
        }
        // Between steps nothing is gathered, the root included.
        EXPECT_FALSE(Resident(*tr->wte()));
        EXPECT_FALSE(Resident(*blocks[1]));
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

TEST(FsdpNestedTest, UnitLayersMustNameASequential) {
  sim::RunResult r = sim::Run(1, [](int, comm::Communicator& comm) {
    Generator gen(5);
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                            nn::Gpt::Create(TinyConfig(), gen));
    auto missing = FullyShardedDataParallel::Create(
        *model, comm, {.unit_layers = "transformer.blocks"});
    EXPECT_THAT(missing.status().message(), HasSubstr("no such submodule"));
    auto not_seq = FullyShardedDataParallel::Create(
        *model, comm, {.unit_layers = "transformer.ln_f"});
    EXPECT_THAT(not_seq.status().message(),
                HasSubstr("that submodule is a LayerNorm"));
    auto plain = FullyShardedDataParallel::Create(*model, comm);
    EXPECT_THAT(plain.status().message(),
                HasSubstr("must be an nn::Sequential"));
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

// A wrapped Sequential run directly (not through the wrapper) is refused:
// its layers' parameters live in shards.
TEST(FsdpNestedTest, TheModelsOwnForwardIsRefused) {
  sim::RunResult r = sim::Run(1, [](int, comm::Communicator& comm) {
    Generator gen(5);
    nn::Sequential model;
    TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(3, 2, gen)));
    TANDEM_ASSIGN_OR_RETURN(auto fsdp,
                            FullyShardedDataParallel::Create(model, comm));
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros({1, 3}));
    EXPECT_TRUE(fsdp->Forward(x).ok());
    absl::StatusOr<Tensor> direct = model.Forward(x);
    EXPECT_EQ(direct.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(direct.status().message(),
                HasSubstr("ran outside the wrapper's Forward"));
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
