"""torchvision's side of image_folder_peer_test.

Usage: image_folder_peer.py ROOT PIPELINE OUT_PREFIX

Reads ROOT with torchvision.datasets.ImageFolder (PIL's loader:
Image.open(path).convert("RGB")) and writes
  OUT_PREFIX.txt  one line per sample: path relative to ROOT, a tab, class
  OUT_PREFIX.bin  every sample's tensor, float32 little-endian, in order
for PIPELINE:
  plain   ToTensor()
  train   Resize(40), CenterCrop(36), RandomCrop(32, padding=4),
          RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)
  shrink  Resize(20), CenterCrop(18), ToTensor(), Normalize(mean, std)
Sample i is transformed right after torch.manual_seed(1000 + i), which is
what tandem's Generator(1000 + i) reproduces.
Exits 77 when PIL, torch or torchvision is missing (the test then skips).
"""
import os
import sys

try:
    import torch
    import torchvision
    from torchvision import transforms as T
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"image_folder_peer.py: {error}", file=sys.stderr)
    sys.exit(77)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def pipeline(name):
    if name == "plain":
        return T.ToTensor()
    if name == "train":
        return T.Compose([
            T.Resize(40),
            T.CenterCrop(36),
            T.RandomCrop(32, padding=4),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ])
    if name == "shrink":
        return T.Compose([
            T.Resize(20),
            T.CenterCrop(18),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ])
    raise SystemExit(f"unknown pipeline {name}")


def main():
    root, name, out = sys.argv[1:4]
    data = torchvision.datasets.ImageFolder(root)
    transform = pipeline(name)
    with open(out + ".txt", "w") as listing, open(out + ".bin", "wb") as blob:
        for i, (path, label) in enumerate(data.samples):
            listing.write(f"{os.path.relpath(path, root)}\t{label}\n")
            torch.manual_seed(1000 + i)
            x = transform(data.loader(path))
            blob.write(x.numpy().astype("<f4").tobytes())
    print(f"torchvision {torchvision.__version__}: {len(data.samples)} "
          f"samples, {len(data.classes)} classes, pipeline {name}")


if __name__ == "__main__":
    main()
