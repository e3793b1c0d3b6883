// tandem::nn::Gpt — GPT-2 as Hugging Face's GPT2LMHeadModel (transformers
// 4.36.2) computes it, with its state-dict names:
//
//   transformer.wte.weight [V, C]            token embedding (and lm_head)
//   transformer.wpe.weight [block_size, C]   position embedding
//   transformer.h.{i}.ln_1.{weight,bias} [C]
//   transformer.h.{i}.attn.c_attn.{weight [3C, C], bias [3C]}
//   transformer.h.{i}.attn.c_proj.{weight [C, C], bias [C]}
//   transformer.h.{i}.ln_2.{weight,bias} [C]
//   transformer.h.{i}.mlp.c_fc.{weight [4C, C], bias [4C]}
//   transformer.h.{i}.mlp.c_proj.{weight [C, 4C], bias [C]}
//   transformer.ln_f.{weight,bias} [C]
//
// in that order (NamedParameters() and StateDict(); no buffers). Linear
// weights are in nn::Linear's [out, in] layout; Hugging Face's Conv1D keeps
// [in, out], so an exporter transposes them. lm_head is tied to
// transformer.wte.weight: one parameter, listed once, whose gradient is the
// sum of its two uses (DDP, ZeRO and FSDP see it once). 124,439,808
// parameters for GptConfig::Gpt2(), as Hugging Face counts them.
//
// Forward(idx [B, T] i64 or i32, T <= block_size, ids in [0, V)) -> logits
// [B, T, V]:
//   x = drop(wte[idx] + wpe[0..T))
//   each block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))
//     attn: q, k, v from one fused projection (c_attn, q then k then v,
//       each split into n_head heads of n_embd / n_head), causal softmax
//       of q k^T / sqrt(head_dim), attention dropout, heads merged,
//       c_proj, residual dropout;
//     mlp: c_fc, GELU (tanh approximation: HF's "gelu_new"), c_proj,
//       dropout;
//   logits = ln_f(x) wte^T.
// Dropout (config.dropout, the same p for HF's embd_pdrop, attn_pdrop and
// resid_pdrop) is drawn from the generator given to Create, in training
// mode only (Train()/Eval()), in forward order.
//
// Initial weights: Hugging Face's sequence of draws, from `gen`:
//   1. construction, in module order: wte and wpe N(0, 1) (nn.Embedding);
//      per block c_attn, attn.c_proj, c_fc, mlp.c_proj N(0, 0.02) drawn in
//      Conv1D's [in, out] order and stored transposed;
//   2. GPT2Model's _init_weights, modules visited children first: wte, wpe
//      N(0, 0.02); per block c_attn.weight and attn.c_proj.weight N(0,
//      0.02), then attn.c_proj.weight again N(0, 0.02 / sqrt(2 n_layer)),
//      c_fc.weight, mlp.c_proj.weight N(0, 0.02), mlp.c_proj.weight again
//      N(0, 0.02 / sqrt(2 n_layer)) (Conv1D order, transposed); biases 0;
//      every LayerNorm weight 1, bias 0;
//   3. lm_head's own draws (kaiming-uniform [V, C], then N(0, 0.02)), which
//      tying then discards: they only advance `gen`.
// Every parameter is f32. From seed s the weights equal
// torch.manual_seed(s); GPT2LMHeadModel(config) bit for bit under
// transformers 4.36.2 (//bench:hf_gpt2_export_test checks it; docs/models.md).
//
// Ownership and threads: the model keeps a reference to `gen` for its
// dropout masks; `gen` must outlive it. One thread at a time (Module).
#ifndef TANDEM_TENSOR_NN_MODELS_GPT_H_
#define TANDEM_TENSOR_NN_MODELS_GPT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/nn/models/gpt_generate.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Embedding;
class Dropout;
class LayerNorm;
class Linear;
class Sequential;

struct GptConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;  // n_positions: the longest sequence
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;  // embedding, attention and residual dropout
  double layer_norm_epsilon = 1e-5;

  // InvalidArgument naming the field, its value and what is expected: every
  // size >= 1, n_embd divisible by n_head, dropout finite in [0, 1),
  // layer_norm_epsilon finite and >= 0.
  absl::Status Validate() const;
  // "vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32,
  // dropout=0, layer_norm_epsilon=1e-05": for messages and checkpoints.
  std::string ToString() const;
  // The parameters Gpt::Create builds for this configuration (the tied
  // lm_head counted once), from the sizes alone, so that a model too large
  // for the machine is refused before any of it is allocated. Saturates at
  // INT64_MAX instead of overflowing.
  int64_t NumParameters() const;
  // GPT-2 small (124M): Hugging Face's "gpt2" configuration (the defaults).
  static GptConfig Gpt2();
};

// HF's GPT2Attention: fused QKV, causal multi-head attention. Children
// "c_attn" [3C <- C] and "c_proj" [C <- C]. x [B, T, C] -> [B, T, C].
class GptAttention : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<GptAttention>> Create(
      const GptConfig& config, Generator& gen);
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "GPT2Attention"; }
  Linear* c_attn() const { return c_attn_; }
  Linear* c_proj() const { return c_proj_; }

 private:
  GptAttention(const GptConfig& config, Generator& gen)
      : config_(config), gen_(&gen) {}
  GptConfig config_;
  Generator* gen_;  // not owned: attention dropout
  Linear* c_attn_ = nullptr;
  Linear* c_proj_ = nullptr;
  Dropout* resid_dropout_ = nullptr;
};

// HF's GPT2MLP: c_fc [4C <- C], GELU (tanh), c_proj [C <- 4C], dropout.
class GptMlp : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<GptMlp>> Create(const GptConfig& config,
                                                        Generator& gen);
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "GPT2MLP"; }
  Linear* c_fc() const { return c_fc_; }
  Linear* c_proj() const { return c_proj_; }

 private:
  GptMlp() = default;
  Linear* c_fc_ = nullptr;
  Linear* c_proj_ = nullptr;
  Dropout* dropout_ = nullptr;
};

// HF's GPT2Block: ln_1, attn, ln_2, mlp (pre-norm residual).
class GptBlock : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<GptBlock>> Create(
      const GptConfig& config, Generator& gen);
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "GPT2Block"; }
  GptAttention* attn() const { return attn_; }
  GptMlp* mlp() const { return mlp_; }

 private:
  GptBlock() = default;
  LayerNorm* ln_1_ = nullptr;
  GptAttention* attn_ = nullptr;
  LayerNorm* ln_2_ = nullptr;
  GptMlp* mlp_ = nullptr;
};

// HF's GPT2Model ("transformer"): wte, wpe, drop, h (blocks "0".."L-1"),
// ln_f. Forward(idx [B, T]) -> the final hidden states ln_f(x) [B, T, C].
class GptTransformer : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<GptTransformer>> Create(
      const GptConfig& config, Generator& gen);
  absl::StatusOr<Tensor> Forward(const Tensor& idx) override;
  std::string_view type_name() const override { return "GPT2Model"; }
  Embedding* wte() const { return wte_; }
  Embedding* wpe() const { return wpe_; }
  GptBlock* block(int64_t i) const;

 private:
  explicit GptTransformer(const GptConfig& config) : config_(config) {}
  GptConfig config_;
  Embedding* wte_ = nullptr;
  Embedding* wpe_ = nullptr;
  Dropout* drop_ = nullptr;
  Sequential* h_ = nullptr;
  LayerNorm* ln_f_ = nullptr;
};

// HF's GPT2LMHeadModel: "transformer" and the tied lm_head.
class Gpt : public Module {
 public:
  // config.Validate()'s error, or allocation failure. `gen` draws the
  // initial weights (see the top of this file) and, later, every dropout
  // mask; it must outlive the model.
  static absl::StatusOr<std::unique_ptr<Gpt>> Create(const GptConfig& config,
                                                     Generator& gen);

  // idx [B, T] (i64 or i32) -> logits [B, T, vocab_size]. InvalidArgument
  // for another rank, T > block_size (naming both) or an id outside
  // [0, vocab_size) (naming it and its position).
  absl::StatusOr<Tensor> Forward(const Tensor& idx) override;
  std::string_view type_name() const override { return "GPT2LMHeadModel"; }

  // PyTorch's F.cross_entropy(logits.view(-1, V), targets.view(-1),
  // ignore_index): the mean over the targets that are not ignore_index
  // (Hugging Face's default -100; nanoGPT uses -1). logits [B, T, V] (as
  // Forward returns them), targets [B, T] i64. 0-d result.
  static absl::StatusOr<Tensor> Loss(const Tensor& logits,
                                     const Tensor& targets,
                                     int64_t ignore_index = -100);

  // nanoGPT's generate: `prompt` followed by options.max_new_tokens ids
  // sampled from this model's logits (tensor/nn/models/gpt_generate.h: the
  // draw, the errors). Call Eval() first to sample without dropout. A model
  // behind a strategy whose forward is collective (FSDP) samples through
  // GenerateTokens with the strategy's forward instead.
  absl::StatusOr<std::vector<int64_t>> Generate(std::vector<int64_t> prompt,
                                                const GenerateOptions& options,
                                                Generator& gen);

  const GptConfig& config() const { return config_; }
  GptTransformer* transformer() const { return transformer_; }

 private:
  explicit Gpt(const GptConfig& config) : config_(config) {}
  GptConfig config_;
  GptTransformer* transformer_ = nullptr;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_MODELS_GPT_H_
