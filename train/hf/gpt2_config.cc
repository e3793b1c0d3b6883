#include "train/hf/gpt2_config.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/nn/py_repr.h"
#include "train/checkpoint/json.h"

namespace tandem::train::hf {
namespace {

using checkpoint::JsonValue;

// transformers' GPT2Config defaults for the fields tandem does not set.
constexpr int64_t kBosEosToken = 50256;

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "Hugging Face config ", std::string(source), ": ", std::string(what)));
}

// The JSON text of a value as Python's json.dumps writes a float.
std::string Float(double v) { return nn::PyFloatRepr(v); }

}  // namespace

std::string Gpt2ConfigJson(const nn::GptConfig& c) {
  const std::string p = Float(c.dropout);
  // Keys sorted, as save_pretrained writes them (json.dumps sort_keys).
  std::vector<std::string> lines = {
      R"("activation_function": "gelu_new")",
      "\"architectures\": [\n    \"GPT2LMHeadModel\"\n  ]",
      absl::StrCat("\"attn_pdrop\": ", p),
      absl::StrCat("\"bos_token_id\": ", kBosEosToken),
      absl::StrCat("\"embd_pdrop\": ", p),
      absl::StrCat("\"eos_token_id\": ", kBosEosToken),
      R"("initializer_range": 0.02)",
      absl::StrCat("\"layer_norm_epsilon\": ", Float(c.layer_norm_epsilon)),
      R"("model_type": "gpt2")",
      absl::StrCat("\"n_ctx\": ", c.block_size),
      absl::StrCat("\"n_embd\": ", c.n_embd),
      absl::StrCat("\"n_head\": ", c.n_head),
      R"("n_inner": null)",
      absl::StrCat("\"n_layer\": ", c.n_layer),
      absl::StrCat("\"n_positions\": ", c.block_size),
      R"("reorder_and_upcast_attn": false)",
      absl::StrCat("\"resid_pdrop\": ", p),
      R"("scale_attn_by_inverse_layer_idx": false)",
      R"("scale_attn_weights": true)",
      R"("summary_activation": null)",
      R"("summary_first_dropout": 0.1)",
      R"("summary_proj_to_labels": true)",
      R"("summary_type": "cls_index")",
      R"("summary_use_proj": true)",
      R"("torch_dtype": "float32")",
      R"("transformers_version": "4.36.2")",
      R"("use_cache": true)",
      absl::StrCat("\"vocab_size\": ", c.vocab_size),
  };
  return absl::StrCat("{\n  ", absl::StrJoin(lines, ",\n  "), "\n}\n");
}

absl::StatusOr<nn::GptConfig> ParseGpt2ConfigJson(std::string_view text,
                                                  std::string_view source) {
  absl::StatusOr<JsonValue> parsed = checkpoint::ParseJson(text);
  if (!parsed.ok()) {
    return Bad(source, std::string(parsed.status().message()));
  }
  if (parsed->kind != JsonValue::Kind::kObject) {
    return Bad(source, "expected a JSON object");
  }
  const auto& obj = parsed->object;
  auto find = [&](const char* key) -> const JsonValue* {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &it->second;
  };
  const JsonValue* type = find("model_type");
  if (type == nullptr || type->kind != JsonValue::Kind::kString ||
      type->string != "gpt2") {
    return Bad(source,
               absl::StrCat("model_type is ",
                            type == nullptr ? std::string("absent")
                            : type->kind == JsonValue::Kind::kString
                                ? checkpoint::JsonQuote(type->string)
                                : std::string("not a string"),
                            ", expected \"gpt2\" (a GPT2LMHeadModel config)"));
  }
  auto integer = [&](const char* key) -> absl::StatusOr<int64_t> {
    const JsonValue* v = find(key);
    if (v == nullptr || v->kind != JsonValue::Kind::kInteger) {
      return Bad(
          source,
          absl::StrCat(key, " is ", v == nullptr ? "absent" : "not an integer",
                       ", expected the model's ", key));
    }
    return v->integer;
  };
  auto number = [&](const char* key,
                    double fallback) -> absl::StatusOr<double> {
    const JsonValue* v = find(key);
    if (v == nullptr) return fallback;
    if (v->kind == JsonValue::Kind::kNumber) return v->number;
    if (v->kind == JsonValue::Kind::kInteger) {
      return static_cast<double>(v->integer);
    }
    return Bad(source, absl::StrCat(key, " is not a number"));
  };
  // A boolean field that must be `want` (or absent, GPT2Config's default).
  auto flag = [&](const char* key, bool want) -> absl::Status {
    const JsonValue* v = find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->kind != JsonValue::Kind::kBool || v->boolean != want) {
      return Bad(source,
                 absl::StrCat(key, " must be ", want ? "true" : "false",
                              ": tandem's GPT computes only that form"));
    }
    return absl::OkStatus();
  };
  nn::GptConfig c;
  TANDEM_ASSIGN_OR_RETURN(c.vocab_size, integer("vocab_size"));
  TANDEM_ASSIGN_OR_RETURN(c.block_size, integer("n_positions"));
  TANDEM_ASSIGN_OR_RETURN(c.n_embd, integer("n_embd"));
  TANDEM_ASSIGN_OR_RETURN(c.n_layer, integer("n_layer"));
  TANDEM_ASSIGN_OR_RETURN(c.n_head, integer("n_head"));
  TANDEM_ASSIGN_OR_RETURN(c.layer_norm_epsilon,
                          number("layer_norm_epsilon", 1e-5));
  TANDEM_ASSIGN_OR_RETURN(c.dropout, number("resid_pdrop", 0.1));
  if (const JsonValue* act = find("activation_function");
      act != nullptr &&
      (act->kind != JsonValue::Kind::kString ||
       (act->string != "gelu_new" && act->string != "gelu_pytorch_tanh"))) {
    return Bad(source,
               "activation_function must be \"gelu_new\" or "
               "\"gelu_pytorch_tanh\" (GELU's tanh form, what tandem's GPT "
               "computes)");
  }
  if (const JsonValue* inner = find("n_inner");
      inner != nullptr && inner->kind != JsonValue::Kind::kNull &&
      (inner->kind != JsonValue::Kind::kInteger ||
       inner->integer != 4 * c.n_embd)) {
    return Bad(source,
               absl::StrCat("n_inner must be null or 4 * n_embd = ",
                            4 * c.n_embd, " (tandem's GPT has a 4x wide MLP)"));
  }
  TANDEM_RETURN_IF_ERROR(flag("scale_attn_weights", true));
  TANDEM_RETURN_IF_ERROR(flag("scale_attn_by_inverse_layer_idx", false));
  TANDEM_RETURN_IF_ERROR(flag("add_cross_attention", false));
  TANDEM_RETURN_IF_ERROR(flag("tie_word_embeddings", true));
  return c;
}

absl::Status CheckGpt2Config(const nn::GptConfig& found,
                             const nn::GptConfig& want,
                             std::string_view source) {
  std::vector<std::string> diffs;
  auto compare = [&](const char* hf_name, const char* flag, int64_t f,
                     int64_t w) {
    if (f != w) {
      diffs.push_back(absl::StrCat(hf_name, " is ", f, ", the run asks for ", w,
                                   " (", flag, ")"));
    }
  };
  compare("vocab_size", "--vocab", found.vocab_size, want.vocab_size);
  compare("n_positions", "--block_size", found.block_size, want.block_size);
  compare("n_layer", "--n_layer", found.n_layer, want.n_layer);
  compare("n_head", "--n_head", found.n_head, want.n_head);
  compare("n_embd", "--n_embd", found.n_embd, want.n_embd);
  if (!(found.layer_norm_epsilon == want.layer_norm_epsilon)) {
    diffs.push_back(
        absl::StrCat("layer_norm_epsilon is ", Float(found.layer_norm_epsilon),
                     ", the model has ", Float(want.layer_norm_epsilon)));
  }
  if (diffs.empty()) return absl::OkStatus();
  return Bad(source, absl::StrCat("describes another model: ",
                                  absl::StrJoin(diffs, "; "),
                                  ". Give the flags of the saved model, or "
                                  "export one of this configuration"));
}

}  // namespace tandem::train::hf
