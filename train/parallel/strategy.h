// train/parallel: how a run spreads one model over ranks and devices. This
// folder holds the one Strategy interface the examples, bench and train/loop
// program against; the mechanisms live in subfolders, each with its own
// BUILD: core/ (what every wrapper shares: the tensor -> comm bridge, the
// flat-parameter core, cross-rank checks), ddp/ (full replicas: DDP, Join,
// comm hooks, SyncBatchNorm), sharded/ (ZeRO-1/2, FSDP), pipeline/ (stages
// across ranks) and devices/ (one process, several devices: DataParallel,
// Pipe). Map: docs/architecture.md.
//
// Strategy: the one interface to how a data-parallel run keeps its model,
// gradients and optimizer state across ranks (the examples' --shard flag,
// bench's zero_benchmark, train/loop's TrainingLoop):
//
//   local  the model and its optimizer, no communication (a world of one;
//          not a --shard value: chosen by code)
//   none   DistributedDataParallel + the optimizer on every rank
//   zero1  DDP + ZeroRedundancyOptimizer: optimizer state sharded
//   zero2  DDP reduce-scattering its buckets + ZeroRedundancyOptimizer
//   fsdp   FullyShardedDataParallel (one unit per layer of the model or of
//          a Sequential inside it), optimizer on the parameter shards
//   pipeline  this rank's stage of a model split across ranks
//          (pipeline/pipeline.h), optionally replicated with DDP over each
//          stage's replicas (Strategy::CreatePipeline; not a --shard value)
//
// All of them but pipeline give the same weights bit for bit
// (train/parallel's tests), so an example reaches the same loss and
// accuracy whatever the mode.
//
//   TANDEM_ASSIGN_OR_RETURN(ShardMode mode, ParseShardMode(flag));
//   TANDEM_ASSIGN_OR_RETURN(auto trainer,
//                           Strategy::Create(mode, *model, comm, make));
//   // or, with the settings some modes read (StrategyOptions):
//   //   Strategy::Create(mode, *model, comm, make,
//   //                    {.fsdp_unit_layers = "transformer.h"});
//   trainer->ZeroGrad();
//   TANDEM_ASSIGN_OR_RETURN(Tensor logits, trainer->Forward(x));
//   ... loss ...
//   TANDEM_RETURN_IF_ERROR(trainer->Backward(loss));
//   TANDEM_RETURN_IF_ERROR(trainer->Step());
//
// A pipeline step has another shape: it consumes a whole batch, split into
// micro-batches that flow through the stages, so forward, loss and backward
// are one call (torch.distributed.pipelining's schedule.step(x,
// target=y), DeepSpeed's PipelineEngine.train_batch; both refuse a separate
// forward and backward, and so does Forward/Backward here):
//
//   TANDEM_ASSIGN_OR_RETURN(PipelinePlacement at,
//                           PlacePipeline(comm.size(), comm.rank(), replicas));
//   auto stage_layers = ...;  // this rank's layers: stage at.stage
//   TANDEM_ASSIGN_OR_RETURN(
//       auto trainer, Strategy::CreatePipeline(comm, *stage_layers,
//                                              {.chunks = 4, .loss = Mse,
//                                               .replicas = replicas},
//                                              SgdFactory(lr)));
//   trainer->ZeroGrad();
//   TANDEM_ASSIGN_OR_RETURN(double loss, trainer->PipelineStep(x, target));
//   TANDEM_RETURN_IF_ERROR(trainer->Step());  // each rank its own stage
//
// Collective like the wrappers it holds; belongs to the rank's thread; the
// model and communicator outlive it.
#ifndef TANDEM_TRAIN_PARALLEL_STRATEGY_H_
#define TANDEM_TRAIN_PARALLEL_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/nn/module.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/optimizer.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/core/virtual_world.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/pipeline/pipeline.h"
#include "train/parallel/sharded/fsdp.h"
#include "train/parallel/sharded/sharded_optimizer_state.h"
#include "train/parallel/sharded/zero_optimizer.h"

namespace tandem::train {

enum class ShardMode { kNone, kZero1, kZero2, kFsdp, kLocal, kPipeline };

// "none" (or "ddp", gpt_ddp's --parallel word), "zero1", "zero2", "fsdp"
// (the --shard values; kLocal and kPipeline are not); InvalidArgument
// naming the choices.
absl::StatusOr<ShardMode> ParseShardMode(std::string_view text);
std::string ShardModeName(ShardMode mode);

// Whether `amp` (an example's --amp) works with `mode`: fsdp gathers the
// parameters in --amp's dtype, and f16 parameters need loss scaling (a
// GradScaler), which the examples that take --shard do not run.
// InvalidArgument saying so for fsdp with f16; OK otherwise.
absl::Status CheckShardAmp(ShardMode mode, std::optional<DType> amp);

// The factory of an optim::Sgd(lr, options) over the tensors it is given
// (Sgd::Create's checks: lr and options finite, PyTorch's rules).
ShardOptimizerFactory SgdFactory(double lr, optim::SgdOptions options = {});

// The factory of an optim::AdamW(options) over nanoGPT's two parameter
// groups of the tensors it is given (optim::WeightDecayGroups:
// options.weight_decay on tensors of two or more dimensions, none on the
// rest). A sharded strategy hands it 1-d shards, which all land in the
// no-decay group and then take their parameters' decay
// (sharded/shard_weight_decay.h), so every mode takes the same steps.
ShardOptimizerFactory AdamWFactory(optim::AdamWOptions options);

// Where world rank `rank` of `world_size` sits in a pipeline of
// world_size / replicas stages, each replicated `replicas` times: replica
// rank / stages, stage rank % stages (the stages of one replica are
// consecutive ranks).
struct PipelinePlacement {
  int64_t stages = 1;
  int64_t replicas = 1;
  int stage = 0;
  int replica = 0;
  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == stages - 1; }
};
// InvalidArgument unless 1 <= replicas and replicas divides world_size
// (0 <= rank < world_size is the caller's).
absl::StatusOr<PipelinePlacement> PlacePipeline(int world_size, int rank,
                                                int64_t replicas);

struct PipelineStrategyOptions {
  PipelineSchedule schedule = PipelineSchedule::kGPipe;
  int64_t chunks = 1;  // micro-batches per batch (PipelineOptions::chunks)
  // The loss of one micro-batch (used on the last stage; every rank may
  // pass the same function).
  PipelineLossFn loss = nullptr;
  // Copies of each stage (PlacePipeline); > 1 runs DDP over the replicas
  // of a stage, its gradient sync around the stage's last backward.
  int64_t replicas = 1;
  bool scale_grads = true;                    // PipelineOptions::scale_grads
  absl::Duration timeout = absl::Minutes(5);  // PipelineOptions::timeout
};

// What Strategy::Create takes beyond the mode, model, communicator and
// optimizer factory: settings that only some modes read (the others ignore
// them). Designated-initialiser friendly:
//   Strategy::Create(mode, model, comm, make,
//                    {.fsdp_param_dtype = DType::kBF16,
//                     .fsdp_unit_layers = "transformer.h"});
// (GCC 12 at -O2 warns falsely, -Wmaybe-uninitialized, on some nested
// designated initialisers of structs holding a std::string: set the fields
// one by one where that bites.)
struct StrategyOptions {
  // fsdp (the examples' --amp): the units are gathered and computed in this
  // dtype and reduced in it (FsdpOptions::param_dtype; the masters stay
  // f32). The other modes keep f32 parameters and leave low precision to
  // autocast. nullopt: f32.
  std::optional<DType> fsdp_param_dtype{};
  // none, zero1, zero2: how DDP's buckets travel (DdpOptions::comm_hook;
  // zero2 takes only the plain all-reduce).
  DdpCommHook comm_hook = DdpCommHook::kAllReduce;
  // fsdp (FsdpOptions::unit_layers): the dotted name of the Sequential
  // inside the model whose layers are units (GPT-2: "transformer.h", one
  // unit per block, the rest the root unit); empty: the model is the
  // Sequential.
  std::string fsdp_unit_layers{};
  // The virtual world (docs/virtual_world.md): > 0 makes this rank play
  // K / W of K virtual ranks, whose gradients FoldVirtualRank and
  // ReduceVirtualRanks sum in the fixed order; 0: off (PyTorch's DDP,
  // unchanged). Every mode takes it: none (DDP), zero1 and zero2 sum the
  // whole gradient and take their slices at Step, fsdp sums unit by unit
  // (FsdpOptions::virtual_world). BatchNorm's buffers are virtual rank 0's
  // after each step, as DDP's buffer broadcast leaves them. Create refuses
  // a world size that cannot play K (CheckVirtualWorld), SyncBatchNorm and
  // compressing comm hooks, naming the values.
  int64_t virtual_world = 0;
};

class Strategy {
 public:
  // `make_optimizer` builds the optimizer of the tensors it is given: the
  // model's parameters (local, none), the rank's shards (zero1, zero2,
  // fsdp). Param groups: under zero1, zero2 and fsdp it is also called once
  // with the model's parameters, and each shard element takes the weight
  // decay of its parameter's group there (shard_weight_decay.h), so a
  // factory that builds nanoGPT's decay / no-decay groups from the tensors
  // it gets (decay on >= 2 dims: 1-d shards land in no-decay, then take
  // their parameters' decay) steps the same weights in every mode. fsdp
  // needs an nn::Sequential (one unit per layer; or
  // StrategyOptions::fsdp_unit_layers) and local a communicator of one rank:
  // InvalidArgument saying so otherwise. `options`: the mode-specific
  // settings (StrategyOptions; the defaults suit every mode).
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(
      ShardMode mode, nn::Module& model, comm::Communicator& comm,
      const ShardOptimizerFactory& make_optimizer,
      const StrategyOptions& options = {});

  // The pipeline strategy of world rank comm.rank(): `stage_module` is
  // this rank's stage (PlacePipeline(comm.size(), comm.rank(),
  // options.replicas).stage), its optimizer `make_optimizer(its
  // parameters)`. Splits `comm` into the pipeline of this replica and the
  // replicas of this stage (two Communicator::Split calls, in that order),
  // then, with replicas > 1, wraps the stage in DDP over the replicas.
  // Collective over `comm`. Errors: PlacePipeline's, PipelineStage::
  // Create's (chunks < 1, no loss on the last stage), DDP's.
  static absl::StatusOr<std::unique_ptr<Strategy>> CreatePipeline(
      comm::Communicator& comm, nn::Module& stage_module,
      const PipelineStrategyOptions& options,
      const ShardOptimizerFactory& make_optimizer);

  ShardMode mode() const { return mode_; }
  // Where this rank stands in the virtual world (off unless
  // StrategyOptions::virtual_world).
  const VirtualWorld& virtual_world() const { return virtual_world_; }
  // The virtual world's step (every mode but pipeline): each of this rank's
  // virtual ranks runs ZeroGrad, its forwards and backwards inside NoSync(),
  // then FoldVirtualRank; after the last, ReduceVirtualRanks (collective)
  // leaves in every gradient DDP's average at K virtual ranks, summed in the
  // fixed order; then ClipGradNorm and Step as usual. FailedPrecondition when
  // the virtual world is off, and VirtualGradSum's order errors.
  absl::Status FoldVirtualRank();
  absl::Status ReduceVirtualRanks();
  // Pipeline only (nullopt and null otherwise): this rank's place, its
  // stage engine.
  const std::optional<PipelinePlacement>& pipeline_placement() const {
    return placement_;
  }
  PipelineStage* pipeline_stage() const { return pipeline_.get(); }

  // Pipeline only: one training step's forward, loss and backward over
  // every micro-batch of the batch (PipelineStage::Step); the first stage
  // reads `input`, the last `target`, other arguments are ignored. Returns
  // the step's loss on every rank: the mean of the micro-batch losses,
  // averaged over replicas. Gradients accumulate (ZeroGrad first); Step()
  // then updates this stage. Collective over the world;
  // FailedPrecondition under the other modes (use Forward and Backward).
  absl::StatusOr<double> PipelineStep(const Tensor& input,
                                      const Tensor& target);
  // The last PipelineStep's result on this stage (micro-batch losses on
  // the last stage, peak live micro-batches); nullopt before the first.
  const std::optional<PipelineStepResult>& last_pipeline_result() const {
    return last_pipeline_result_;
  }

  // In grad mode a training step's forward; under NoGradGuard evaluation
  // (FSDP gathers and frees each unit; the others run the model).
  // Forward and Backward are FailedPrecondition under pipeline (a step is
  // PipelineStep).
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  absl::Status Backward(const Tensor& loss);
  absl::Status Step();
  void ZeroGrad();
  // torch.nn.utils.clip_grad_norm_ over the whole model, between Backward
  // and Step: local and none clip the model's (all-reduced) gradients
  // (optim::ClipGradNorm, no communication); zero1, zero2 and fsdp compute
  // the norm from the shards (grad_clip.h: one all-reduce of one value) and
  // scale the gradients their Step applies; pipeline treats each stage's
  // gradients as its shard of the model's (one all-reduce over the
  // replica's pipeline; the replicas' gradients are equal after their
  // sync). Returns the norm before clipping, the same on every rank.
  // Collective under zero1, zero2, fsdp and pipeline.
  absl::StatusOr<double> ClipGradNorm(double max_norm);
  // Gradient accumulation: while the guard lives, backward passes only
  // accumulate local gradients (DDP's NoSync, also under zero1 and zero2);
  // nullopt under local and fsdp (fsdp's backward reduce-scatters every
  // micro-batch and accumulates into the gradient shards: the same sum, in
  // another order) and pipeline (a step accumulates its micro-batches).
  std::optional<DistributedDataParallel::NoSyncGuard> NoSync();
  // The optimizer this rank steps: the whole model's under local and none,
  // this rank's shards' otherwise (null on a zero1/zero2 rank without
  // elements).
  optim::Optimizer* local_optimizer() const;
  // Which model parameter each element of the local optimizer's tensors
  // belongs to (sharded_optimizer_state.h); empty under local and none.
  std::vector<FlatShard> ShardLayout() const;
  // Whether the model's parameters hold their values between steps (false
  // under fsdp: read them through fsdp()->FullStateDict()).
  bool parameters_resident() const { return fsdp_ == nullptr; }
  FullyShardedDataParallel* fsdp() const { return fsdp_.get(); }
  // DDP under none, zero1 and zero2 (its last_sync_stats feed the progress
  // line); nullptr under local and fsdp.
  const DistributedDataParallel* ddp() const { return ddp_.get(); }
  // The same DDP, for an evaluation forward through it (under NoGradGuard
  // DDP's Forward still broadcasts rank 0's buffers, which Forward() skips).
  DistributedDataParallel* mutable_ddp() const { return ddp_.get(); }
  // The optimizer of the whole model under local and none; nullptr where it
  // holds only this rank's shards or stage.
  optim::Optimizer* full_optimizer() const {
    return zero_ == nullptr && fsdp_ == nullptr && pipeline_ == nullptr
               ? optimizer_.get()
               : nullptr;
  }

  // Checkpoints: the full state, the same in every mode and at every world
  // size (what --shard=none on one rank would hold), so a checkpoint saved
  // in one mode and world size loads in any other. Not under pipeline
  // (a stage holds part of the model under its own names):
  // FailedPrecondition saying so from all four.
  // The model's state dict (parameters in their own dtype, then buffers).
  // Collective under fsdp (gathers every unit); a copy in every mode.
  absl::StatusOr<nn::StateDict> FullModelState();
  // What an unsharded optimizer of the whole model would export
  // (Optimizer::ExportState). Collective under zero1, zero2 and fsdp
  // (sharded_optimizer_state.h); the tensors are fresh copies.
  absl::StatusOr<std::vector<optim::StateEntry>> FullOptimizerState();
  // Local: each rank takes its part of a full state. Model: all or nothing
  // (InvalidArgument naming the key). Optimizer: all or nothing
  // (InvalidArgument naming the entry and the parameter it does not fit).
  absl::Status LoadFullModelState(const nn::StateDict& state);
  absl::Status LoadFullOptimizerState(
      const std::vector<optim::StateEntry>& state);
  // The optimizer's learning rate (0 on a zero1/zero2 rank that holds no
  // element; rank 0 always holds some).
  double lr() const;
  // The parameter groups an unsharded optimizer of the whole model would
  // export (Optimizer::ExportParamGroups): under zero1, zero2 and fsdp the
  // groups of the factory's optimizer of the model's parameters, with the
  // local optimizer's current lr. Empty on a rank without a local
  // optimizer and under pipeline.
  std::vector<optim::ParamGroupState> FullParamGroups() const;

 private:
  Strategy(ShardMode mode, nn::Module& model, comm::Communicator& comm)
      : mode_(mode), model_(&model), comm_(&comm) {}
  // FailedPrecondition naming `what` under pipeline; OK otherwise.
  absl::Status NotUnderPipeline(std::string_view what) const;
  absl::StatusOr<double> ClipPipelineGradNorm(double max_norm);
  ShardMode mode_;
  nn::Module* model_;
  comm::Communicator* comm_;
  // Pipeline: the communicators it split (the pipeline of this replica;
  // the replicas of this stage), the stage engine, this rank's place.
  std::unique_ptr<comm::Communicator> pipe_comm_;
  std::unique_ptr<comm::Communicator> replica_comm_;
  std::unique_ptr<PipelineStage> pipeline_;
  std::optional<PipelinePlacement> placement_;
  std::optional<PipelineStepResult> last_pipeline_result_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<ZeroRedundancyOptimizer> zero_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // local, none and fsdp
  // zero1, zero2, fsdp: the factory's optimizer of the model's parameters,
  // whose param groups the shards follow (never stepped).
  std::unique_ptr<optim::Optimizer> groups_;
  VirtualWorld virtual_world_;
  std::unique_ptr<VirtualGradSum> virtual_grads_;  // when it is on
  // The virtual world's buffers (BatchNorm's running statistics): a copy
  // taken after the step's first virtual rank, put back after its last and
  // broadcast from rank 0.
  absl::Status SnapshotVirtualBuffers();
  absl::Status SettleVirtualBuffers();
  int64_t virtual_folded_ = 0;  // virtual ranks folded in this step
  std::vector<Tensor> virtual_buffers_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_STRATEGY_H_
