from __future__ import annotations

from anpred.machine import cpu_flags, describe_machine

#: Excerpts of /proc/cpuinfo from two real machine kinds (flags trimmed to the relevant).
EPYC_GENOA = """processor\t: 0
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512_vnni avx512_bf16
"""
ZEN2 = """processor\t: 0
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse4_2 avx avx2 fma f16c
"""


def test_bf16_capability_is_detected_from_the_flags() -> None:
    genoa = describe_machine(EPYC_GENOA)
    assert genoa["cpu"] == "AMD EPYC 9B14"
    assert genoa["bf16_arithmetic"] and not genoa["fp16_arithmetic"]
    assert "avx512_bf16" in genoa["features"]
    zen2 = describe_machine(ZEN2)
    assert not zen2["bf16_arithmetic"]
    assert zen2["features"] == ["avx", "avx2", "f16c", "fma", "sse4_2"]


def test_this_machine_is_described_without_assuming_a_feature() -> None:
    record = describe_machine()
    assert record["arch"] and record["cores"]
    assert record["bf16_arithmetic"] == bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
