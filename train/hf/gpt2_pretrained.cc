#include "train/hf/gpt2_pretrained.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/safetensors.h"
#include "train/hf/gpt2_config.h"
#include "train/hf/gpt2_tensors.h"

namespace tandem::train::hf {
namespace {

std::string Join(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

}  // namespace

absl::Status SaveGpt2Pretrained(const std::string& dir,
                                const nn::StateDict& state,
                                const nn::GptConfig& config) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  TANDEM_ASSIGN_OR_RETURN(nn::StateDict tensors, ToHfGpt2(state));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat(
        "Hugging Face export: cannot create the folder ", dir, ": ",
        std::strerror(errno), "; name a folder whose parent exists"));
  }
  // The weights first: a folder with a config.json is one from_pretrained
  // would try, so the config is written once the weights are whole.
  TANDEM_RETURN_IF_ERROR(checkpoint::SaveSafetensors(
      Join(dir, kWeightsFile), tensors, {{"format", "pt"}}));
  return checkpoint::WriteFileAtomically(Join(dir, kConfigFile),
                                         Gpt2ConfigJson(config));
}

absl::Status SaveGpt2Pretrained(const std::string& dir, const nn::Gpt& model) {
  return SaveGpt2Pretrained(dir, model.StateDict(), model.config());
}

absl::Status LoadGpt2Pretrained(const std::string& dir,
                                const nn::GptConfig& config,
                                nn::Module& model) {
  const std::string config_path = Join(dir, kConfigFile);
  const std::string weights_path = Join(dir, kWeightsFile);
  for (const std::string& path : {config_path, weights_path}) {
    if (checkpoint::FileExists(path)) continue;
    std::string hint;
    if (checkpoint::FileExists(Join(dir, "model.safetensors.index.json"))) {
      hint =
          " (the folder holds sharded weights, which are not read: "
          "save_pretrained(DIR, max_shard_size=\"100GB\") writes one file)";
    } else if (checkpoint::FileExists(Join(dir, "pytorch_model.bin"))) {
      hint =
          " (the folder holds pytorch_model.bin, which is not read: "
          "save_pretrained(DIR, safe_serialization=True) writes "
          "model.safetensors)";
    }
    return absl::NotFoundError(
        absl::StrCat("Hugging Face model folder ", dir, ": no ", path, hint,
                     "; expected what GPT2LMHeadModel.save_pretrained writes"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string text, checkpoint::ReadFile(config_path));
  TANDEM_ASSIGN_OR_RETURN(nn::GptConfig found,
                          ParseGpt2ConfigJson(text, config_path));
  TANDEM_RETURN_IF_ERROR(CheckGpt2Config(found, config, config_path));
  TANDEM_ASSIGN_OR_RETURN(checkpoint::SafetensorsContent content,
                          checkpoint::LoadSafetensors(weights_path));
  TANDEM_RETURN_IF_ERROR(
      checkpoint::CheckFiniteTensors(content.tensors, weights_path));
  TANDEM_ASSIGN_OR_RETURN(
      nn::StateDict state,
      FromHfGpt2(content.tensors, model.StateDict(), weights_path));
  return model.LoadStateDict(state, /*strict=*/true);
}

absl::Status LoadGpt2Pretrained(const std::string& dir, nn::Gpt& model) {
  return LoadGpt2Pretrained(dir, model.config(), model);
}

}  // namespace tandem::train::hf
