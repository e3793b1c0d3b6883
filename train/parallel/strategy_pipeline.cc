// Strategy's pipeline mode (strategy.h): the stage engine of
// pipeline/pipeline.h behind Strategy, with DDP over each stage's replicas.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/sharded/grad_clip.h"
#include "train/parallel/strategy.h"

namespace tandem::train {

absl::StatusOr<PipelinePlacement> PlacePipeline(int world_size, int rank,
                                                int64_t replicas) {
  if (replicas < 1 || world_size % replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a pipeline of ", world_size, " ranks cannot hold ", replicas,
        " replicas: the world size must be a multiple of the replica count "
        "(world = stages x replicas); rank ",
        rank));
  }
  PipelinePlacement at;
  at.replicas = replicas;
  at.stages = world_size / replicas;
  at.replica = rank / static_cast<int>(at.stages);
  at.stage = rank % static_cast<int>(at.stages);
  return at;
}

absl::StatusOr<std::unique_ptr<Strategy>> Strategy::CreatePipeline(
    comm::Communicator& comm, nn::Module& stage_module,
    const PipelineStrategyOptions& options,
    const ShardOptimizerFactory& make_optimizer) {
  TANDEM_ASSIGN_OR_RETURN(
      const PipelinePlacement at,
      PlacePipeline(comm.size(), comm.rank(), options.replicas));
  std::unique_ptr<Strategy> t(
      new Strategy(ShardMode::kPipeline, stage_module, comm));
  t->placement_ = at;
  TANDEM_ASSIGN_OR_RETURN(t->pipe_comm_, comm.Split(at.replica, at.stage));
  TANDEM_ASSIGN_OR_RETURN(t->replica_comm_, comm.Split(at.stage, at.replica));
  PipelineOptions stage_options{.schedule = options.schedule,
                                .chunks = options.chunks,
                                .scale_grads = options.scale_grads,
                                .timeout = options.timeout};
  if (options.replicas > 1) {
    TANDEM_ASSIGN_OR_RETURN(t->ddp_, DistributedDataParallel::Create(
                                         stage_module, *t->replica_comm_));
    // The stage runs the module itself; DDP syncs the gradients around its
    // last backward (torch.distributed.pipelining with DDP).
    DistributedDataParallel* ddp = t->ddp_.get();
    stage_options.before_last_backward = [ddp] {
      return ddp->PrepareForBackward();
    };
    stage_options.after_last_backward = [ddp] {
      return ddp->FinishGradientSync();
    };
  }
  TANDEM_ASSIGN_OR_RETURN(t->pipeline_,
                          PipelineStage::Create(*t->pipe_comm_, stage_module,
                                                stage_options, options.loss));
  TANDEM_ASSIGN_OR_RETURN(t->optimizer_,
                          make_optimizer(stage_module.Parameters()));
  return t;
}

absl::StatusOr<double> Strategy::PipelineStep(const Tensor& input,
                                              const Tensor& target) {
  if (pipeline_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PipelineStep is the step of the pipeline strategy; this one is ",
        ShardModeName(mode_), ": use Forward and Backward"));
  }
  const PipelinePlacement& at = *placement_;
  TANDEM_ASSIGN_OR_RETURN(PipelineStepResult result,
                          pipeline_->Step(at.first_stage() ? input : Tensor(),
                                          at.last_stage() ? target : Tensor()));
  last_pipeline_result_ = result;
  TANDEM_ASSIGN_OR_RETURN(double loss, pipeline_->ShareLoss(result));
  if (at.replicas == 1) return loss;
  // The replicas' mean, reduced where the stage computes (a device-only
  // engine such as NCCL takes device memory only).
  TANDEM_ASSIGN_OR_RETURN(Tensor host, Tensor::Scalar(loss, DType::kF64));
  TANDEM_ASSIGN_OR_RETURN(Tensor on_device, host.To(pipeline_->device()));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(on_device));
  TANDEM_RETURN_IF_ERROR(replica_comm_->AllReduce(view, comm::ReduceOp::kAvg)
                             ->Wait(pipeline_->options().timeout));
  TANDEM_ASSIGN_OR_RETURN(host, on_device.To(Device::CPU()));
  return host.data<double>()[0];
}

absl::StatusOr<double> Strategy::ClipPipelineGradNorm(double max_norm) {
  // Each stage's gradients are a disjoint part of the model's, and every
  // replica's are the same after DDP's sync: the model's norm is the
  // sharded norm over this replica's pipeline.
  std::vector<Tensor> grads;
  for (const Tensor& p : model_->Parameters()) {
    if (p.defined() && p.has_grad()) grads.push_back(p.grad());
  }
  return ClipShardedGradNorm(*pipe_comm_, pipeline_->device(), grads, max_norm);
}

absl::Status Strategy::NotUnderPipeline(std::string_view what) const {
  if (pipeline_ == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(what), " is not available under the pipeline strategy (",
      "rank ", comm_->rank(), ", stage ", placement_->stage,
      "): a step is PipelineStep(input, target), and each stage holds only "
      "its own part of the model, so there is no full state to save or load "
      "here; use local, none, zero1, zero2 or fsdp for that"));
}

}  // namespace tandem::train
