"""What this CPU can do, and whether llama.cpp may repack the model's weights for it (``llm.weight_repack``).

llama.cpp "repacks" weights at load time into layouts its fastest kernels read ("extra buffer types":
``CPU_REPACK`` on ARM and AVX2, ``AMX`` on Intel CPUs with Advanced Matrix Extensions). On the Pi's ARM
cores the repacked Q4_0 kernels are what make the model fast; on x86 with AMX the AMX buffer of
llama-cpp-python 0.3.36 segfaults at the first matrix multiplication (``ggml_backend_amx_mul_mat``,
llama.cpp issue 20824, unfixed upstream). So ``auto`` repacks everywhere except where the CPU has AMX.

Decided at run time from /proc/cpuinfo, not at build time: the same wheel runs on different CPUs (a
venv copied, an image built on one machine and booted on another). Nothing here imports llama.cpp.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

# The flags that name the features llama.cpp's CPU backend chooses kernels by (x86 and ARM spellings).
INTERESTING = (
    "avx",
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "fma",
    "f16c",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "asimd",
    "asimddp",
    "i8mm",
    "sve",
    "fphp",
)
AMX = ("amx_tile", "amx_int8", "amx_bf16")
SETTINGS = ("auto", "on", "off")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The feature flags of the first CPU (x86 ``flags``, ARM ``Features``); empty where unreadable."""
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


@dataclass(frozen=True)
class RepackChoice:
    """Whether llama.cpp may repack weights here, and why (shown by doctor and /api/status)."""

    repack: bool
    setting: str  # auto | on | off, as configured
    reason: str
    features: tuple[str, ...]  # the interesting CPU features present

    def as_dict(self) -> dict[str, object]:
        """The JSON form for /api/status and the runner's report."""
        return {
            "repack": self.repack,
            "setting": self.setting,
            "reason": self.reason,
            "cpu_features": list(self.features),
        }


def choose_repack(setting: str, flags: set[str] | None = None, machine: str | None = None) -> RepackChoice:
    """``llm.weight_repack`` resolved for this CPU: ``auto`` is off on x86 with AMX, on everywhere else."""
    flags = cpu_flags() if flags is None else flags
    machine = machine or platform.machine()
    features = tuple(f for f in INTERESTING if f in flags)
    if setting == "on":
        return RepackChoice(True, setting, "llm.weight_repack is on", features)
    if setting == "off":
        return RepackChoice(False, setting, "llm.weight_repack is off", features)
    amx = [f for f in AMX if f in flags]
    if amx:
        return RepackChoice(
            False,
            setting,
            f"this {machine} CPU has AMX ({', '.join(amx)}), whose repacked kernels crash in this llama.cpp",
            features,
        )
    return RepackChoice(True, setting, f"{machine}: repacked weights are fast and sound here", features)
