#!/usr/bin/env bash
# Here, before a lent GPU machine is asked for: TensorFlow 2.21 for that machine's Python 3.12,
# without its C++ headers, xz'd and split into .tfc/partNN (each under the device tool's 64 MiB
# a call), plus ../shared. Takes about 10 minutes on 2 cores. See tools/gpu/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${TMPDIR:-/tmp}/graphfit-gpu-wheels
rm -rf "$work"  # one version of each wheel
mkdir -p "$work/site" .tfc
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$work" tensorflow==2.21.0 keras==3.15.1 optree namex gast astunparse google-pasta \
  termcolor ml-dtypes nvidia-cuda-runtime-cu12
for wheel in "$work"/*.whl; do python3 -m zipfile -e "$wheel" "$work/site"; done
rm -rf "$work/site/tensorflow/include"
tar cf - -C "$work" site | xz -8 -T2 > "$work/site.tar.xz"
rm -f .tfc/part*
split -b 56m -d -a 2 "$work/site.tar.xz" .tfc/part
rm -rf .tfc/shared && cp -r ../shared .tfc/shared && chmod -R u+w .tfc/shared
ls -la .tfc
