"""pipelines/sass_report.py reads cuobjdump's two listings (text shapes of cuobjdump 13.2)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from conftest import load_script

SCRIPT = Path(__file__).parents[1] / "pipelines" / "sass_report.py"

SASS = """
\tcode for sm_90
\t\tFunction : dp_ntt_pass
\t.headerflags\t@"EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                        /* 0x00000a00ff017b82 */
                                                                                 /* 0x000e220000000800 */
        /*0010*/                   STL [R1+0x4], R2 ;                            /* 0x0000040201007387 */
        /*0020*/              @!P0 BRA 0x2d90 ;                                  /* 0x0000002c00040947 */
        /*10ff0*/                  LDL.LU.64 R4, [R1+0x28] ;                     /* 0x0000280001047983 */
        /*11000*/                  DFMA.RZ R36, R22, R28, 2.02e+31 ;             /* 0x467000001624742b */
        /*11010*/             @P1 LDL R3, [R1] ;                                 /* 0x0000000001037983 */
\t\t..........

\t\tFunction : dp_fr_scale
        /*0000*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                 /* 0x0000000000007b1d */
        /*0010*/                   CALL.REL.NOINC 0xded0 ;                       /* 0x000000bc008c7944 */
"""

RES = """Resource usage:
 Common:
  GLOBAL:0
 Function dp_ntt_pass:
  REG:80 STACK:56 SHARED:0 LOCAL:0 CONSTANT[0]:624 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function dp_fr_scale:
  REG:56 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:544 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


@pytest.fixture(scope="module")
def sr() -> ModuleType:
    return load_script(SCRIPT, register=True)


def test_census_counts_each_function_past_0xffff(sr: ModuleType) -> None:
    """Predicated and five-hex-digit addresses count; encodings and headers do not."""
    got = sr.census(SASS)
    assert set(got) == {"dp_ntt_pass", "dp_fr_scale"}
    assert got["dp_ntt_pass"] == {"LDC": 1, "STL": 1, "BRA": 1, "LDL": 2, "DFMA": 1}
    assert got["dp_fr_scale"] == {"BAR": 1, "CALL": 1}


def test_resources_per_function(sr: ModuleType) -> None:
    assert sr.resources(RES) == {"dp_ntt_pass": {"reg": 80, "stack": 56, "shared": 0, "local": 0},
                                 "dp_fr_scale": {"reg": 56, "stack": 0, "shared": 1024, "local": 0}}
