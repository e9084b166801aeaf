"""Independent float64 reference of ffpa_attn.decode (per sequence, on the logical cache) and a
shuffled page pool holding a logical cache: shared by the CPU and GPU decode tests."""
from __future__ import annotations

import math

import torch

from _cpu_helpers import ref_attention


def reference(q, k_logical, v_logical, lens, causal, scale=None):
    """Per sequence b: q[b] (Lq, Hq, D) against keys 0..lens[b]-1 of k_logical[b] (S, Hkv, D)."""
    B, Lq, Hq, _ = q.shape
    outs, lses = [], []
    for b in range(B):
        n = int(lens[b])
        qb = q[b].transpose(0, 1).double()  # (Hq, Lq, D)
        kb, vb = k_logical[b, :n].transpose(0, 1).double(), v_logical[b, :n].transpose(0, 1).double()
        if n == 0:
            outs.append(torch.zeros(Hq, Lq, v_logical.shape[-1], dtype=torch.float64))
            lses.append(torch.full((Hq, Lq), -math.inf, dtype=torch.float64))
            continue
        o, lse = ref_attention(qb, kb, vb, is_causal=causal, scale=scale, enable_gqa=True, causal_bottom_right=True)
        outs.append(o)
        lses.append(lse)
    return torch.stack(outs).transpose(1, 2), torch.stack(lses)  # (B, Lq, Hq, Dv), (B, Hq, Lq)


def paged(gen, k_logical, v_logical, page):
    """A shuffled page pool holding the logical caches, and its block table."""
    B, S = k_logical.shape[:2]
    pages = S // page
    perm = torch.randperm(B * pages + 3, generator=gen)[: B * pages]  # spare pages stay garbage
    pool_k = torch.full((B * pages + 3, page) + k_logical.shape[2:], math.nan, dtype=k_logical.dtype)
    pool_v = torch.full((B * pages + 3, page) + v_logical.shape[2:], math.nan, dtype=v_logical.dtype)
    table = perm.view(B, pages).to(torch.int32)
    for b in range(B):
        for p in range(pages):
            pool_k[table[b, p]] = k_logical[b, p * page:(p + 1) * page]
            pool_v[table[b, p]] = v_logical[b, p * page:(p + 1) * page]
    return pool_k, pool_v, table
