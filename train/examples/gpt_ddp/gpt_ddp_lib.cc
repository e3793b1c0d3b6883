#include "train/examples/gpt_ddp/gpt_ddp_lib.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/models/gpt_generate.h"
#include "tensor/optim/lr_scheduler.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/distributed_sampler.h"
#include "train/examples/runner/model_memory.h"
#include "train/hf/gpt2_pretrained.h"
#include "train/loop/evaluate.h"
#include "train/loop/index_batches.h"
#include "train/loop/must_match.h"
#include "train/loop/run_monitor.h"
#include "train/loop/training_loop.h"
#include "train/parallel/core/config_agreement.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

// fsdp: a unit per block (PyTorch's transformer_auto_wrap_policy over
// GPT2Block); the embeddings, final LayerNorm and tied head the root unit.
constexpr char kBlocks[] = "transformer.h";

// nanoGPT's lr of step `step` (0-based).
double LrAt(const GptDdpConfig& c, int64_t step) {
  if (c.lr_decay == "constant") return c.lr;
  return optim::WarmupCosineLR::Rate({.warmup_iters = c.warmup_steps,
                                      .lr_decay_iters = c.max_steps,
                                      .min_lr = c.min_lr},
                                     c.lr, step);
}

std::string Printable(const std::string& bytes) {
  std::string out;
  for (unsigned char ch : bytes) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch >= 32 && ch < 127 && ch != '\\') {
      out += static_cast<char>(ch);
    } else {
      out += absl::StrFormat("\\x%02x", ch);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<GptDdpResult> RunGptDdp(comm::Communicator& comm,
                                       const GptDdpConfig& config,
                                       const TokenBlocks& data, Device device) {
  const std::string model_desc = config.model.ToString();
  // What the ranks agree on: the model, the agreed options (in order), the
  // checkpoint and the corpus by what it is. A resume must match them
  // (train/loop/must_match.h), so a checkpoint of another model is refused.
  std::vector<ConfigEntry> agreed = {{"model", model_desc}};
  for (ConfigEntry& e : Entries(config.RankFlags())) agreed.push_back(e);
  agreed.insert(agreed.end(),
                {{"--checkpoint_dir", config.checkpoint.dir},
                 {"--checkpoint_every", config.checkpoint.every_steps},
                 {"corpus tokens", data.num_tokens()},
                 {"corpus hash",
                  HashHex(HashBytes(data.tokens().data(),
                                    data.tokens().size() * sizeof(int32_t)))}});
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(comm, device, agreed));
  TANDEM_RETURN_IF_ERROR(CheckGptDdpConfig(config));
  TANDEM_ASSIGN_OR_RETURN(const ShardMode mode,
                          ParseShardMode(config.parallel));  // ddp: kNone
  const comm::RankPrinter out(comm);

  // Blocks: the last tenth (at least one) validates, the rest trains.
  const int64_t val_blocks = std::max<int64_t>(1, data.size() / 10);
  const int64_t train_blocks = data.size() - val_blocks;
  const int64_t per_step = config.batch_size * config.grad_accum;
  // The replicas the blocks are split over: the ranks, or the virtual ranks.
  const int64_t replicas =
      config.virtual_world > 0 ? config.virtual_world : comm.size();
  const int64_t per_rank = train_blocks / replicas;  // drop_last
  const int64_t steps_per_epoch = per_rank / per_step;
  if (steps_per_epoch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gpt_ddp: ", data.source(), " gives ", train_blocks,
        " training blocks of ", config.block_size, " tokens (",
        data.num_tokens(), " tokens, ", val_blocks,
        " held out for validation); one step needs --batch_size x "
        "--grad_accum = ",
        per_step, " blocks on each of ", replicas,
        config.virtual_world > 0 ? " virtual ranks" : " ranks",
        "; use a longer text or smaller --block_size, --batch_size, "
        "--grad_accum"));
  }

  // The model, the same on every rank, if every rank's copy fits: the
  // whole model first (fsdp then shards it), under ddp with its gradients
  // and AdamW's two moments.
  TANDEM_RETURN_IF_ERROR(CheckModelsFitInMemory(
      comm, "gpt_ddp", config.model.NumParameters(),
      mode == ShardMode::kNone ? 16 : 4,
      mode == ShardMode::kNone
          ? "f32 weights, gradients and AdamW's two moments"
          : "f32 weights, before they are sharded"));
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Gpt> model,
                          nn::Gpt::Create(config.model, gen));
  if (!config.init_from.empty()) {
    TANDEM_RETURN_IF_ERROR(hf::LoadGpt2Pretrained(config.init_from, *model));
  }
  TANDEM_RETURN_IF_ERROR(model->To(device));
  // One schedule of max_steps steps over epochs of the sampler's order
  // (stop_after cuts it short for the resume tests). Field by field: GCC 12
  // -O2 warns falsely on nested designated initialisers.
  LoopOptions options;
  options.who = "gpt_ddp";
  options.epochs = (config.max_steps + steps_per_epoch - 1) / steps_per_epoch;
  options.device = device;
  options.checkpoint = config.checkpoint;
  const std::optional<DType> autocast_dtype = AutocastDType(config.amp);
  options.autocast = autocast_dtype;
  options.max_grad_norm = config.grad_clip;
  // f16's narrow range needs loss scaling (ddp only: CheckGptDdpConfig).
  if (config.amp == "f16") options.grad_scaler = optim::GradScalerOptions{};
  options.max_steps =
      config.stop_after > 0 && config.stop_after < config.max_steps
          ? config.stop_after
          : config.max_steps;
  options.grad_accum = config.grad_accum;
  options.model_description = model_desc;
  options.lr_at = [&config](int64_t step) { return LrAt(config, step); };
  // Each rank's dropout masks of a step: a stream of their own, so a resumed
  // run draws what an uninterrupted one draws.
  options.reseed_each_step = &gen;
  options.step_seed = config.seed;
  options.must_match = MustMatchOnResume(agreed);
  options.position_by_global_step = true;
  options.mean_loss_over_ranks = true;  // the printed loss
  options.virtual_world = config.virtual_world;
  // AdamW over nanoGPT's two groups: decay on matrices and embeddings.
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, mode,
                           AdamWFactory({.lr = config.lr,
                                         .beta1 = config.beta1,
                                         .beta2 = config.beta2,
                                         .eps = 1e-8,
                                         .weight_decay = config.weight_decay}),
                           std::move(options), {.fsdp_unit_layers = kBlocks}));
  Strategy& trainer = loop->strategy();

  // Checkpoints: the files an unsharded run writes, in every mode.
  TANDEM_ASSIGN_OR_RETURN(const checkpoint::TrainingProgress start,
                          loop->Resume());
  if (start.global_step >= config.max_steps && start.global_step > 0) {
    out.PrintOnRank0(
        absl::StrCat("gpt_ddp: the checkpoint is at step ", start.global_step,
                     ", --max_steps=", config.max_steps, ": nothing to train"));
  }

  // The training blocks of each epoch: the sampler's order, a step's
  // batch_size x grad_accum blocks in order (the loop cuts them into
  // grad_accum micro-batches of batch_size).
  // One sampler per (virtual) rank this rank plays.
  const VirtualWorld& vw = trainer.virtual_world();
  std::vector<DistributedSampler> samplers;
  for (int64_t v = 0; v < vw.local; ++v) {
    TANDEM_ASSIGN_OR_RETURN(
        DistributedSampler sampler,
        DistributedSampler::Create(train_blocks, {.num_replicas = replicas,
                                                  .rank = vw.rank_of(v),
                                                  .shuffle = true,
                                                  .seed = config.seed,
                                                  .drop_last = true}));
    samplers.push_back(std::move(sampler));
  }
  TANDEM_ASSIGN_OR_RETURN(
      IndexBatches batches,
      IndexBatches::Create(
          std::move(samplers), per_step,
          [&data](const std::vector<int64_t>& blocks) -> absl::StatusOr<Batch> {
            TANDEM_ASSIGN_OR_RETURN(TokenBatch b, data.Batch(blocks));
            return Batch{.features = std::move(b.x), .labels = std::move(b.y)};
          }));
  out.PrintOnRank0(absl::StrFormat(
      "gpt_ddp: %s (%d tokens, %d train / %d val blocks of %d), %s, GPT %s, "
      "%d parameters, --parallel=%s",
      data.source(), data.num_tokens(), train_blocks, val_blocks,
      config.block_size, WorldDescription(comm, config.virtual_world),
      model_desc, model->NumParameters(), config.parallel));

  // Validation: the mean loss of the first eval_blocks validation blocks,
  // split across the ranks (train/loop/evaluate.h). Collective.
  auto validate = [&]() -> absl::StatusOr<double> {
    model->Eval();
    TANDEM_ASSIGN_OR_RETURN(
        double loss,
        HeldOutMeanLoss(
            comm, device, std::min(val_blocks, config.eval_blocks),
            [&](int64_t i) -> absl::StatusOr<double> {
              TANDEM_ASSIGN_OR_RETURN(TokenBatch b,
                                      data.Batch({train_blocks + i}));
              TANDEM_ASSIGN_OR_RETURN(Tensor x, b.x.To(device));
              TANDEM_ASSIGN_OR_RETURN(Tensor y, b.y.To(device));
              // Forward and loss under autocast, as in training.
              std::optional<amp::Autocast> autocast;
              if (autocast_dtype.has_value()) {
                autocast.emplace(device.type(), *autocast_dtype);
              }
              TANDEM_ASSIGN_OR_RETURN(Tensor logits, trainer.Forward(x));
              TANDEM_ASSIGN_OR_RETURN(Tensor l, nn::Gpt::Loss(logits, y));
              return l.Item();
            },
            /*fixed_order=*/vw.on()));
    model->Train();
    return loss;
  };

  GptDdpResult result;
  const int64_t tokens_per_step = per_step * config.block_size * replicas;
  LoopHooks hooks;
  hooks.step_report = [&](const StepView&, StepReport& report) {
    report.samples = tokens_per_step;  // the progress line counts tokens
  };
  hooks.after_checked_step = [&](const StepView& v) -> absl::Status {
    if (!v.first_on_rank) return absl::OkStatus();  // once a step
    const int64_t s = v.global_step;
    result.final_loss = v.mean_loss;  // over ranks and micro-batches
    if ((s + 1) % config.log_every == 0 || s + 1 == config.max_steps) {
      out.PrintOnRank0(absl::StrFormat(
          "step %d | loss %.6f | lr %.4e | tokens/s %.0f", s + 1, v.mean_loss,
          LrAt(config, s),
          v.seconds > 0 ? static_cast<double>(tokens_per_step) / v.seconds
                        : 0.0));
    }
    if ((config.eval_every > 0 && (s + 1) % config.eval_every == 0) ||
        s + 1 == config.max_steps) {
      TANDEM_ASSIGN_OR_RETURN(result.val_loss, validate());
      out.PrintOnRank0(
          absl::StrFormat("step %d | val loss %.6f", s + 1, result.val_loss));
    }
    return absl::OkStatus();
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(
      batches,
      [](const Tensor& logits, const Tensor& y) {
        return nn::Gpt::Loss(logits, y);
      },
      hooks));
  if (config.stop_after > 0 && config.stop_after < config.max_steps) {
    return result;  // stopped as if killed: no export, no sample
  }

  if (!config.export_hf.empty()) {
    // Collective under fsdp (every unit gathered); rank 0 writes.
    TANDEM_ASSIGN_OR_RETURN(nn::StateDict full_model, trainer.FullModelState());
    if (comm.rank() == 0) {
      TANDEM_RETURN_IF_ERROR(hf::SaveGpt2Pretrained(
          config.export_hf, std::move(full_model), config.model));
    }
  }

  if (config.sample_tokens > 0) {
    // Every rank generates alike (FSDP's forward is collective).
    model->Eval();
    Generator sampler_gen(config.seed);
    nn::LogitsSource source{
        .forward = [&](const Tensor& x) { return trainer.Forward(x); },
        .block_size = config.block_size,
        .vocab_size = config.model.vocab_size,
        .device = device,
    };
    TANDEM_ASSIGN_OR_RETURN(
        std::vector<int64_t> ids,
        nn::GenerateTokens(
            source, {'\n'},
            {.max_new_tokens = config.sample_tokens, .top_k = config.top_k},
            sampler_gen));
    const std::string text(ids.begin() + 1, ids.end());  // byte-level ids
    result.sample = text;
    out.PrintOnRank0(absl::StrCat("sample: ", Printable(text)));
  }
  return result;
}

}  // namespace tandem::train
