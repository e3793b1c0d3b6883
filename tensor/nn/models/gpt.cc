#include "tensor/nn/models/gpt.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/nn/init.h"
#include "tensor/nn/layers/dropout.h"
#include "tensor/nn/layers/embedding.h"
#include "tensor/nn/layers/layer_norm.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/py_repr.h"
#include "tensor/ops.h"

namespace tandem::nn {
namespace {

constexpr double kInitStd = 0.02;  // HF's initializer_range

// Conv1D's draw: normal_(0, std) over an [in, out] tensor in element order,
// stored into w [out, in] transposed (nn::Linear's layout).
absl::Status DrawConv1D(const Tensor& w, double std, Generator& gen) {
  TANDEM_ASSIGN_OR_RETURN(Tensor drawn,
                          Tensor::Empty({w.dim(1), w.dim(0)}, w.dtype()));
  TANDEM_RETURN_IF_ERROR(init::Normal(drawn, 0.0, std, gen));
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Permute(drawn, {1, 0}));
  std::memcpy(w.raw_data(), t.raw_data(), static_cast<size_t>(w.nbytes()));
  return absl::OkStatus();
}

// A Linear in HF Conv1D's place: PyTorch's default draws go to a scratch
// generator (HF's Conv1D never makes them), then Conv1D's N(0, 0.02) is
// drawn from `gen`; the bias is 0.
absl::StatusOr<std::unique_ptr<Linear>> Conv1D(int64_t in, int64_t out,
                                               Generator& gen) {
  Generator scratch(0);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Linear> fc,
                          Linear::Create(in, out, scratch));
  TANDEM_RETURN_IF_ERROR(DrawConv1D(fc->weight(), kInitStd, gen));
  TANDEM_RETURN_IF_ERROR(FillInPlace(fc->bias(), 0.0));
  return fc;
}

absl::StatusOr<std::unique_ptr<LayerNorm>> Norm(const GptConfig& config) {
  LayerNorm::Options o;
  o.eps = config.layer_norm_epsilon;
  return LayerNorm::Create(config.n_embd, o);
}

// nn::Linear on [B, T, in]: through [B * T, in].
absl::StatusOr<Tensor> Linear3d(Linear& fc, const Tensor& x) {
  TANDEM_ASSIGN_OR_RETURN(Tensor x2, Reshape(x, {-1, x.dim(x.ndim() - 1)}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, fc.Forward(x2));
  Shape shape = x.shape();
  shape.back() = fc.out_features();
  return Reshape(y, std::move(shape));
}

absl::Status CheckPositive(std::string_view field, int64_t value) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "GptConfig: ", std::string(field), " must be >= 1, got ", value));
}

}  // namespace

absl::Status GptConfig::Validate() const {
  TANDEM_RETURN_IF_ERROR(CheckPositive("vocab_size", vocab_size));
  TANDEM_RETURN_IF_ERROR(CheckPositive("block_size", block_size));
  TANDEM_RETURN_IF_ERROR(CheckPositive("n_layer", n_layer));
  TANDEM_RETURN_IF_ERROR(CheckPositive("n_head", n_head));
  TANDEM_RETURN_IF_ERROR(CheckPositive("n_embd", n_embd));
  if (n_embd % n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GptConfig: n_embd (", n_embd, ") must be divisible by n_head (",
        n_head,
        "): each head gets n_embd / n_head dims; choose n_head among "
        "the divisors of n_embd"));
  }
  if (!(std::isfinite(dropout) && dropout >= 0 && dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GptConfig: dropout must be finite and in [0, 1), got ", dropout));
  }
  if (!(std::isfinite(layer_norm_epsilon) && layer_norm_epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptConfig: layer_norm_epsilon must be finite and >= 0, "
                     "got ",
                     layer_norm_epsilon));
  }
  return absl::OkStatus();
}

std::string GptConfig::ToString() const {
  return absl::StrCat("vocab_size=", vocab_size, ", block_size=", block_size,
                      ", n_layer=", n_layer, ", n_head=", n_head,
                      ", n_embd=", n_embd, ", dropout=", PyFloatRepr(dropout),
                      ", layer_norm_epsilon=", PyFloatRepr(layer_norm_epsilon));
}

int64_t GptConfig::NumParameters() const {
  // In long double, then saturated: the sizes may be anything a flag gave.
  const long double c = static_cast<long double>(n_embd);
  const long double per_block = 2 * c + (3 * c * c + 3 * c) + (c * c + c) +
                                2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
  const long double total = static_cast<long double>(vocab_size) * c +
                            static_cast<long double>(block_size) * c +
                            static_cast<long double>(n_layer) * per_block +
                            2 * c;
  constexpr long double kMax =
      static_cast<long double>(std::numeric_limits<int64_t>::max());
  return total >= kMax ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(total);
}

GptConfig GptConfig::Gpt2() { return GptConfig{}; }

// ---- GptAttention.

absl::StatusOr<std::unique_ptr<GptAttention>> GptAttention::Create(
    const GptConfig& config, Generator& gen) {
  auto a = std::unique_ptr<GptAttention>(new GptAttention(config, gen));
  const int64_t c = config.n_embd;
  TANDEM_ASSIGN_OR_RETURN(a->c_attn_,
                          a->RegisterModule("c_attn", Conv1D(c, 3 * c, gen)));
  TANDEM_ASSIGN_OR_RETURN(a->c_proj_,
                          a->RegisterModule("c_proj", Conv1D(c, c, gen)));
  TANDEM_ASSIGN_OR_RETURN(
      a->resid_dropout_,
      a->RegisterModule("resid_dropout", Dropout::Create(config.dropout, gen)));
  return a;
}

absl::StatusOr<Tensor> GptAttention::Forward(const Tensor& x) {
  if (x.ndim() != 3 || x.dim(2) != config_.n_embd) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT2Attention: expected x [B, T, ", config_.n_embd,
                     "], got ", ShapeToString(x.shape())));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor qkv, Linear3d(*c_attn_, x));  // [B, T, 3C]
  const double p = is_training() ? config_.dropout : 0.0;
  // HF's split, _split_heads, attention and _merge_heads in one op: on the
  // CPU the heads are read and written in place (no permuted copies).
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, CausalSelfAttentionQkv(qkv, config_.n_head, p,
                                       p > 0 ? gen_ : nullptr));  // [B, T, C]
  TANDEM_ASSIGN_OR_RETURN(y, Linear3d(*c_proj_, y));
  return resid_dropout_->Forward(y);
}

// ---- GptMlp.

absl::StatusOr<std::unique_ptr<GptMlp>> GptMlp::Create(const GptConfig& config,
                                                       Generator& gen) {
  auto m = std::unique_ptr<GptMlp>(new GptMlp());
  const int64_t c = config.n_embd;
  TANDEM_ASSIGN_OR_RETURN(m->c_fc_,
                          m->RegisterModule("c_fc", Conv1D(c, 4 * c, gen)));
  TANDEM_ASSIGN_OR_RETURN(m->c_proj_,
                          m->RegisterModule("c_proj", Conv1D(4 * c, c, gen)));
  TANDEM_ASSIGN_OR_RETURN(
      m->dropout_,
      m->RegisterModule("dropout", Dropout::Create(config.dropout, gen)));
  return m;
}

absl::StatusOr<Tensor> GptMlp::Forward(const Tensor& x) {
  TANDEM_ASSIGN_OR_RETURN(Tensor h, Linear3d(*c_fc_, x));
  TANDEM_ASSIGN_OR_RETURN(h, Gelu(h, GeluApproximation::kTanh));
  TANDEM_ASSIGN_OR_RETURN(h, Linear3d(*c_proj_, h));
  return dropout_->Forward(h);
}

// ---- GptBlock.

absl::StatusOr<std::unique_ptr<GptBlock>> GptBlock::Create(
    const GptConfig& config, Generator& gen) {
  auto b = std::unique_ptr<GptBlock>(new GptBlock());
  TANDEM_ASSIGN_OR_RETURN(b->ln_1_, b->RegisterModule("ln_1", Norm(config)));
  TANDEM_ASSIGN_OR_RETURN(
      b->attn_, b->RegisterModule("attn", GptAttention::Create(config, gen)));
  TANDEM_ASSIGN_OR_RETURN(b->ln_2_, b->RegisterModule("ln_2", Norm(config)));
  TANDEM_ASSIGN_OR_RETURN(
      b->mlp_, b->RegisterModule("mlp", GptMlp::Create(config, gen)));
  return b;
}

absl::StatusOr<Tensor> GptBlock::Forward(const Tensor& x) {
  TANDEM_ASSIGN_OR_RETURN(Tensor h, ln_1_->Forward(x));
  TANDEM_ASSIGN_OR_RETURN(h, attn_->Forward(h));
  TANDEM_ASSIGN_OR_RETURN(Tensor x1, Add(x, h));
  TANDEM_ASSIGN_OR_RETURN(h, ln_2_->Forward(x1));
  TANDEM_ASSIGN_OR_RETURN(h, mlp_->Forward(h));
  return Add(x1, h);
}

// ---- GptTransformer.

absl::StatusOr<std::unique_ptr<GptTransformer>> GptTransformer::Create(
    const GptConfig& config, Generator& gen) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  auto m = std::unique_ptr<GptTransformer>(new GptTransformer(config));
  TANDEM_ASSIGN_OR_RETURN(
      m->wte_, m->RegisterModule("wte", Embedding::Create(config.vocab_size,
                                                          config.n_embd, gen)));
  TANDEM_ASSIGN_OR_RETURN(
      m->wpe_, m->RegisterModule("wpe", Embedding::Create(config.block_size,
                                                          config.n_embd, gen)));
  TANDEM_ASSIGN_OR_RETURN(
      m->drop_,
      m->RegisterModule("drop", Dropout::Create(config.dropout, gen)));
  auto h = std::make_unique<Sequential>();
  for (int64_t i = 0; i < config.n_layer; ++i) {
    TANDEM_RETURN_IF_ERROR(h->Append(GptBlock::Create(config, gen)));
  }
  TANDEM_ASSIGN_OR_RETURN(m->h_, m->RegisterModule("h", std::move(h)));
  TANDEM_ASSIGN_OR_RETURN(m->ln_f_, m->RegisterModule("ln_f", Norm(config)));

  // HF's _init_weights over GPT2Model.modules(), children first (apply).
  // LayerNorms are created at 1 and 0 already.
  TANDEM_RETURN_IF_ERROR(init::Normal(m->wte_->weight(), 0.0, kInitStd, gen));
  TANDEM_RETURN_IF_ERROR(init::Normal(m->wpe_->weight(), 0.0, kInitStd, gen));
  const double proj_std =
      kInitStd / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (int64_t i = 0; i < config.n_layer; ++i) {
    GptBlock* block = m->block(i);
    GptAttention* attn = block->attn();
    TANDEM_RETURN_IF_ERROR(DrawConv1D(attn->c_attn()->weight(), kInitStd, gen));
    TANDEM_RETURN_IF_ERROR(DrawConv1D(attn->c_proj()->weight(), kInitStd, gen));
    TANDEM_RETURN_IF_ERROR(DrawConv1D(attn->c_proj()->weight(), proj_std, gen));
    GptMlp* mlp = block->mlp();
    TANDEM_RETURN_IF_ERROR(DrawConv1D(mlp->c_fc()->weight(), kInitStd, gen));
    TANDEM_RETURN_IF_ERROR(DrawConv1D(mlp->c_proj()->weight(), kInitStd, gen));
    TANDEM_RETURN_IF_ERROR(DrawConv1D(mlp->c_proj()->weight(), proj_std, gen));
  }
  return m;
}

GptBlock* GptTransformer::block(int64_t i) const {
  return dynamic_cast<GptBlock*>(h_->at(i));
}

absl::StatusOr<Tensor> GptTransformer::Forward(const Tensor& idx) {
  if (idx.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT2Model: expected token ids [B, T], got ",
                     ShapeToString(idx.shape())));
  }
  const int64_t t = idx.dim(1);
  if (t > config_.block_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT2Model: a sequence of ", t,
        " tokens is longer than the model's block_size (n_positions) ",
        config_.block_size, "; cut the input to at most ", config_.block_size,
        " tokens"));
  }
  std::vector<int64_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[i] = i;
  TANDEM_ASSIGN_OR_RETURN(Tensor pos, Tensor::FromVector(positions));
  if (!idx.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(pos, pos.To(idx.device()));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor tok_emb, wte_->Forward(idx));  // [B, T, C]
  TANDEM_ASSIGN_OR_RETURN(Tensor pos_emb, wpe_->Forward(pos));  // [T, C]
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Add(tok_emb, pos_emb));
  TANDEM_ASSIGN_OR_RETURN(x, drop_->Forward(x));
  TANDEM_ASSIGN_OR_RETURN(x, h_->Forward(x));
  return ln_f_->Forward(x);
}

// ---- Gpt.

absl::StatusOr<std::unique_ptr<Gpt>> Gpt::Create(const GptConfig& config,
                                                 Generator& gen) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  auto m = std::unique_ptr<Gpt>(new Gpt(config));
  TANDEM_ASSIGN_OR_RETURN(
      m->transformer_,
      m->RegisterModule("transformer", GptTransformer::Create(config, gen)));
  // lm_head = nn.Linear(C, V, bias=False): its kaiming-uniform draw at
  // construction and its N(0, 0.02) in _init_weights, both overwritten by
  // tying; made only to leave `gen` where Hugging Face's is.
  TANDEM_ASSIGN_OR_RETURN(Tensor lm_head,
                          Tensor::Empty({config.vocab_size, config.n_embd}));
  TANDEM_RETURN_IF_ERROR(init::KaimingUniform(lm_head, std::sqrt(5.0), gen));
  TANDEM_RETURN_IF_ERROR(init::Normal(lm_head, 0.0, kInitStd, gen));
  return m;
}

absl::StatusOr<Tensor> Gpt::Forward(const Tensor& idx) {
  TANDEM_ASSIGN_OR_RETURN(Tensor h, transformer_->Forward(idx));  // [B, T, C]
  const int64_t b = h.dim(0), t = h.dim(1);
  TANDEM_ASSIGN_OR_RETURN(Tensor h2, Reshape(h, {b * t, config_.n_embd}));
  // lm_head tied to wte: logits = h wte^T, the same leaf as the embedding,
  // so autograd adds both uses into its one gradient.
  TANDEM_ASSIGN_OR_RETURN(
      Tensor logits, MatMul(h2, transformer_->wte()->weight(), false, true));
  return Reshape(logits, {b, t, config_.vocab_size});
}

absl::StatusOr<Tensor> Gpt::Loss(const Tensor& logits, const Tensor& targets,
                                 int64_t ignore_index) {
  if (logits.ndim() != 3 ||
      targets.shape() != Shape{logits.dim(0), logits.dim(1)}) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gpt::Loss: expected logits [B, T, V] and targets [B, T], got logits ",
        ShapeToString(logits.shape()), " and targets ",
        ShapeToString(targets.shape())));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor flat, Reshape(logits, {-1, logits.dim(2)}));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Reshape(targets, {-1}));
  CrossEntropyOptions options;
  options.ignore_index = ignore_index;
  return CrossEntropy(flat, labels, options);
}

absl::StatusOr<std::vector<int64_t>> Gpt::Generate(
    std::vector<int64_t> prompt, const GenerateOptions& options,
    Generator& gen) {
  const std::vector<Tensor> params = Parameters();
  LogitsSource source{
      .forward = [this](const Tensor& idx) { return Forward(idx); },
      .block_size = config_.block_size,
      .vocab_size = config_.vocab_size,
      .device = params.empty() ? Device::CPU() : params.front().device(),
  };
  return GenerateTokens(source, std::move(prompt), options, gen);
}

}  // namespace tandem::nn
