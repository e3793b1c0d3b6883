#!/usr/bin/python3
"""tandem <-> PyTorch checkpoint interop, the Python half of
train/examples/safetensors_interop_test.cc.

    safetensors_interop.py TANDEM_MODEL TANDEM_LOGITS OUT_DIR

1. Builds the toy tutorial's NeuralNetwork(2, 2) (bench/peers/toy_ddp.py),
   loads TANDEM_MODEL (a tandem model.safetensors) with
   safetensors.torch.load_file + load_state_dict (strict), and checks that
   its logits on TANDEM_LOGITS["inputs"] match tandem's TANDEM_LOGITS["logits"]
   (same argmax; values within 1e-6 + 1e-5 * |x|: the GEMM libraries may sum
   in another order; it prints whether they are bitwise equal).
2. Saves a PyTorch-initialised model (torch.manual_seed(7)) with
   safetensors.torch.save_file to OUT_DIR/torch_model.safetensors and its
   logits on the same inputs to OUT_DIR/torch_logits.safetensors, for tandem
   to load and check.

Exit codes: 0 ok, 1 mismatch, 77 PyTorch or safetensors not installed
(the C++ test then skips, saying so).
"""
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"safetensors_interop.py: {e}; install python3-torch and "
          "`pip install safetensors` to run this check")
    sys.exit(77)


class NeuralNetwork(torch.nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(num_inputs, 30),
            torch.nn.ReLU(),
            torch.nn.Linear(30, 20),
            torch.nn.ReLU(),
            torch.nn.Linear(20, num_outputs),
        )

    def forward(self, x):
        return self.layers(x)


def main():
    tandem_model, tandem_logits, out_dir = sys.argv[1:4]
    model = NeuralNetwork(2, 2)
    model.load_state_dict(load_file(tandem_model))  # strict
    model.eval()
    expected = load_file(tandem_logits)
    inputs, want = expected["inputs"], expected["logits"]
    with torch.no_grad():
        got = model(inputs)
    bitwise = torch.equal(got, want)
    print(f"tandem -> torch: max |diff| {(got - want).abs().max().item():.3g}, "
          f"bitwise equal: {bitwise}")
    if not torch.equal(got.argmax(1), want.argmax(1)) or not torch.allclose(
            got, want, rtol=1e-5, atol=1e-6):
        print(f"logits differ:\n torch  {got}\n tandem {want}")
        return 1

    torch.manual_seed(7)
    theirs = NeuralNetwork(2, 2)
    save_file(theirs.state_dict(), f"{out_dir}/torch_model.safetensors",
              metadata={"format": "pt"})
    with torch.no_grad():
        save_file({"inputs": inputs, "logits": theirs(inputs)},
                  f"{out_dir}/torch_logits.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
