#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Record NeMo Lens RL metrics from Python through the shim, with ctypes only.

Run under the preload; nothing is installed or linked:

    LD_PRELOAD=/path/libnemolens_preload.so \\
      OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 python3 rl_metrics.py

The functions come from the preloaded library (ctypes.CDLL(None) sees the
symbols of everything already loaded). Without the preload, the script opens
libnemolens.so instead (NEMOLENS_LIB=/path/libnemolens.so, or the library path).

As a module, `record_rl_metrics(meter, reward_mean=..., ...)` has the signature
of NeMo Lens's nemo.lens.instruments.rl.record_rl_metrics: keyword arguments
left out (or None) are not recorded.
"""
import ctypes
import os
import sys


class OptF64(ctypes.Structure):
    _fields_ = [("set", ctypes.c_bool), ("value", ctypes.c_double)]


class RlMetrics(ctypes.Structure):
    """struct nemolens_rl_metrics, field for field (nemolens.h)."""
    _fields_ = [(name, OptF64) for name in (
        "reward_mean", "kl_divergence", "policy_loss", "value_loss", "entropy",
        "response_length_mean", "grad_norm", "learning_rate", "throughput_tokens_per_sec",
        "generation_duration_ms", "rollout_duration_ms")]


RL_FIELDS = [name for name, _ in RlMetrics._fields_]


def load_library():
    """The shim's C API: the preloaded copy if there is one, else libnemolens.so."""
    candidates = [None]                     # the preloaded .so (already in the process)
    if os.environ.get("NEMOLENS_LIB"):
        candidates.append(os.environ["NEMOLENS_LIB"])
    candidates.append("libnemolens.so.0")
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
            lib.nemolens_record_rl          # raises AttributeError when absent
        except (OSError, AttributeError):
            continue
        lib.nemolens_meter_get.restype = ctypes.c_void_p
        lib.nemolens_meter_get.argtypes = [ctypes.c_char_p]
        lib.nemolens_meter_default.restype = ctypes.c_void_p
        lib.nemolens_meter_default.argtypes = []
        lib.nemolens_meter_release.restype = None
        lib.nemolens_meter_release.argtypes = [ctypes.c_void_p]
        lib.nemolens_record_rl.restype = None
        lib.nemolens_record_rl.argtypes = [ctypes.c_void_p, ctypes.POINTER(RlMetrics), ctypes.c_size_t]
        lib.nemolens_enabled.restype = ctypes.c_bool
        lib.nemolens_enabled.argtypes = []
        lib.nemolens_version.restype = ctypes.c_char_p
        lib.nemolens_version.argtypes = []
        return lib
    raise OSError("the nemolens C API is not available: run under LD_PRELOAD=libnemolens_preload.so "
                  "or set NEMOLENS_LIB to libnemolens.so")


_lib = None


def lib():
    global _lib
    if _lib is None:
        _lib = load_library()
    return _lib


def get_meter(name="nemo.lens"):
    """A meter handle (an opaque pointer); release it with release_meter()."""
    return lib().nemolens_meter_get(name.encode())


def release_meter(meter):
    lib().nemolens_meter_release(meter)


def record_rl_metrics(meter=None, **values):
    """Records the given rl.* values; None or missing values are skipped.
    meter None is the shim's default meter."""
    m = RlMetrics()
    for key, value in values.items():
        if key not in RL_FIELDS:
            raise TypeError(f"record_rl_metrics() got an unexpected keyword argument '{key}'")
        if value is not None:
            setattr(m, key, OptF64(True, float(value)))
    lib().nemolens_record_rl(meter, ctypes.byref(m), ctypes.sizeof(m))


def main():
    meter = get_meter("rl_example")
    # Three training steps, as a trainer would log them.
    for step, (reward, loss) in enumerate([(0.25, 0.9), (0.5, 0.6), (0.75, 0.3)]):
        record_rl_metrics(meter, reward_mean=reward, policy_loss=loss, kl_divergence=0.01 * (step + 1),
                          learning_rate=3e-6, throughput_tokens_per_sec=18500.0,
                          generation_duration_ms=450.0 + 50 * step)
    record_rl_metrics(meter, rollout_duration_ms=2300.0)   # just one value
    state = "recorded; exported at exit" if lib().nemolens_enabled() else "shim disabled, nothing recorded"
    print(f"nemolens {lib().nemolens_version().decode()}: {state}")
    # Releasing is optional: a released meter's series are exported once more, then no longer.
    return 0


if __name__ == "__main__":
    sys.exit(main())
