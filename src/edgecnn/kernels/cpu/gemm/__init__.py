"""GEMM: the register-blocked micro-kernel, packed and tiled GEMMs, fused epilogues, and the Gemm/FusedGemm
steps built on them."""
