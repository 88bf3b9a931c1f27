# Sourced on the GPU machine after setup.sh: the carried TensorFlow, CUDA 13's libraries under
# CUDA 12's names, and the graphfit installed into /tmp/gf.
export PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONPATH=/tmp/gf:/tmp/site
export PATH=/tmp/gf/bin:$(cat /tmp/cudaroot 2>/dev/null)/bin:$PATH
LD_LIBRARY_PATH=$(cat /tmp/ldpath 2>/dev/null)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
export XLA_FLAGS="--xla_gpu_cuda_data_dir=$(cat /tmp/cudaroot 2>/dev/null) ${EXTRA_XLA_FLAGS:-}"
export TF_FORCE_GPU_ALLOW_GROWTH=true TF_CPP_MIN_LOG_LEVEL=1 PYTHONUNBUFFERED=1
