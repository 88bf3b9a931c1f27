"""What a benchmark's figures were measured on: the processor's name.

The ratios the benchmarks print move with the processor (torch's sinc epoch took 44 ms on one
2-core machine and 55 ms on a 2-core AMD EPYC; the bfloat16 matmul peak is about 3x float32's
on a CPU with AMX and about 2x on one with only AVX-512 BF16), so every table names it.
"""

from __future__ import annotations

import platform

__all__ = ["cpu_model"]


def cpu_model() -> str:
    """The processor's name and its bfloat16 matrix instructions (Linux), or the platform's
    word for it.

    Example: "AMD EPYC (avx512_bf16, no AMX)".
    """
    name, flags = None, None
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name is None:
                    name = value.strip()
                elif key.strip() == "flags" and flags is None:
                    flags = set(value.split())
    except OSError:
        pass
    if name is None:
        return platform.processor() or "processor unknown"
    if flags is None:
        return name
    bf16 = "avx512_bf16" if "avx512_bf16" in flags else "no avx512_bf16"
    amx = "amx_bf16" if "amx_bf16" in flags else "no AMX"
    return f"{name} ({bf16}, {amx})"
