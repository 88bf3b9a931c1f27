#!/usr/bin/env bash
# On the GPU machine, once the parts are in /tmp/c: unpacks TensorFlow into /tmp/site, gives
# CUDA 13's libraries the CUDA 12 names TensorFlow 2.21 opens, installs graphfit into /tmp/gf
# (its console script in /tmp/gf/bin), puts ../shared in place, and checks that TensorFlow sees
# the GPU and multiplies correctly. About 25 s. See tools/gpu/README.md.
set -u
cd "$(dirname "$0")/../.." || exit 1
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
if [ ! -f /tmp/site/.unpacked ]; then  # (a marker: a failed unpack is done again)
  rm -rf /tmp/site
  cat /tmp/c/part* | xz -d -T0 | tar x -C /tmp || { echo "unpacking failed"; exit 3; }
  touch /tmp/site/.unpacked
fi
find_lib() { find /opt /usr/local /usr/lib -name "$1" 2>/dev/null | head -1; }
mkdir -p /tmp/cuda12
dirs=/tmp/cuda12:/tmp/site/nvidia/cuda_runtime/lib
for pair in libcublas.so.12:libcublas.so.13 libcublasLt.so.12:libcublasLt.so.13 \
            libcufft.so.11:libcufft.so.12 libcusolver.so.11:libcusolver.so.12 \
            libcusparse.so.12:libcusparse.so.12 libcudnn.so.9:libcudnn.so.9 \
            libnvJitLink.so.12:libnvJitLink.so.13 libnccl.so.2:libnccl.so.2 \
            libcupti.so.12:libcupti.so.12; do
  want=${pair%%:*}; have=$(find_lib "${pair##*:}")
  echo "$want <- ${have:-MISSING}"
  [ -n "$have" ] && ln -sf "$have" "/tmp/cuda12/$want" && dirs=$dirs:$(dirname "$have")
done
echo "$dirs" > /tmp/ldpath
libdevice=$(find /usr/local /opt -name libdevice.10.bc 2>/dev/null | head -1)
[ -n "$libdevice" ] || { echo "no libdevice.10.bc: XLA cannot compile for the GPU"; exit 5; }
dirname "$(dirname "$(dirname "$libdevice")")" > /tmp/cudaroot
. tools/gpu/env.sh
rm -rf /tmp/gf
$PY -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/gf . \
  > /tmp/gf_install.log 2>&1 || { tail -20 /tmp/gf_install.log; exit 4; }
# The tests run the console script from beside the interpreter, as a pip install puts it.
ln -sf /tmp/gf/bin/graphfit "$(dirname "$PY")/graphfit" 2>/dev/null || echo "no graphfit beside $PY"
[ -d ../shared ] || cp -r .tfc/shared ../shared
$PY - <<'PY' || exit 6
import google.protobuf
import keras
import numpy as np
import tensorflow as tf

import graphfit

print("TensorFlow", tf.__version__, "Keras", keras.__version__, "NumPy", np.__version__,
      "protobuf", google.protobuf.__version__, "graphfit from", graphfit.__file__)
print("GPUs", tf.config.list_physical_devices("GPU"))
if not tf.config.list_physical_devices("GPU"):
    raise SystemExit("TensorFlow sees no GPU: see the library lines above")
a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
for dtype in (tf.float32, tf.float16):
    product = tf.matmul(tf.cast(a, dtype), tf.cast(a, dtype)).numpy().astype(np.float64)
    exact = a.astype(np.float64) @ a
    print(dtype.name, "largest relative error", np.abs(product - exact).max() / np.abs(exact).max())
PY
