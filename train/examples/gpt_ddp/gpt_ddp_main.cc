// //train/examples:gpt_ddp (alias //train:gpt_ddp) — a GPT-2 trained
// data-parallel or sharded on a byte-level English corpus, nanoGPT's way.
//
//   ./bazelw run //train:gpt_ddp                             # 2 sim ranks
//   ./bazelw run //train:gpt_ddp -- --parallel=fsdp --sample_tokens=200
//   ./bazelw run //train:gpt_ddp -- --preset=gpt2 --block_size=128
//       --max_steps=2 --batch_size=1                         # 124M
//
// What it prints is described in train/examples/gpt_ddp/gpt_ddp_lib.h. The
// default corpus, train/data/public_domain_english.txt, is public-domain text
// (train/data/README.md says which and why). The common flags and exit
// codes come from train/examples/runner/example_main.h.
#include <memory>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/gpt_ddp/gpt_ddp_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::GptDdpOptions, TANDEM_GPT_DDP_OPTIONS)

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "gpt_ddp",
       .summary = "A GPT-2 (Hugging Face's GPT2LMHeadModel) trained on a "
                  "byte-level text corpus with AdamW, warm-up and cosine "
                  "decay, under DDP, ZeRO-1/2 or FSDP, printing each step's "
                  "loss, the validation loss and, at the end, a sample.",
       .paths = {{.flag = "data"},
                 {.flag = "init_from"},
                 {.flag = "export_hf",
                  .role = tandem::base::PathRole::kOutput,
                  .folder = true}}},
      []() -> absl::StatusOr<ExampleRank> {
        auto config = tandem::train::ConfigFromFlags(
            ExampleOptionsFromFlags, tandem::train::ResolveGptDdpConfig);
        if (!config.ok()) return config.status();
        // The corpus is read once per process; the ranks share its tokens.
        auto data = tandem::train::LoadByteCorpus(
            config->data, config->block_size, config->model.vocab_size);
        if (!data.ok()) return data.status();
        auto shared = std::make_shared<const tandem::train::TokenBlocks>(*data);
        return [config = *config, shared](tandem::comm::Communicator& comm,
                                          tandem::Device device) {
          return tandem::train::RunGptDdp(comm, config, *shared, device)
              .status();
        };
      });
}
