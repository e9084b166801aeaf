"""One small launch per kernel family for compute-sanitizer (memcheck / racecheck): tails in both
L and S, GQA, causal (top-left and bottom-right) and not, a bool mask (block-sparse with a fully
masked row and a broadcast padding mask), every pipeline depth that fits the device for each FFPA
level (L1, L2, L3; L3 also with more items than resident blocks, so blocks take further items
from the work counter; on Hopper L1's warp-specialised TMA kernel at the auto depth), fp16 accumulation where built, and FA-2 on both its kernels (wgmma and
mma.sync; on Hopper the warp-specialised TMA kernel, its look-ahead variant on long keys, its split tail, its TMA store of O, and its
cp.async fallback) where the GPU runs both, and the split-KV decode family (on Hopper both its kernels; contiguous and paged, lengths
0 and odd, causal, one split and several), and the FP8 kernel on Hopper. `python3 sanitize_one.py fa2,decode` runs only
those families' part (of ffpa, fa2, decode, fp8).

FFPA_SANITIZE_NO_CLUSTER=1 (the racecheck run of scripts/gpu_check.sh) keeps L1 at head dims up to
640 on Hopper, where the L1 kernel runs one block per column group: above, the two groups run as a
cluster pair that exchanges row maxima and P through distributed shared memory, synchronised by
cluster-scope mbarriers (release arrivals, acquire waits), which racecheck does not model. It
reports hazards for them even on tests/primitives/hopper_device.cu's cluster test, where each slot
is written once before the writer's arrival and read once after the reader's wait (405 on an H200
with CUDA 13.0). memcheck and synccheck run the pair, and L1's (bf16 and FP8) causal pairs of query
blocks that share K loads (multicast TMA, releases across the pair)."""
import os
import sys

import torch

import ffpa_attn
import ffpa_attn._C as C

info = ffpa_attn.build_info()
dt = torch.bfloat16 if "bfloat16" in info["dtypes"] else torch.float16
L, S = 77, 131
PARTS = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else {"ffpa", "fa2", "decode", "fp8"}
NO_CLUSTER = os.environ.get("FFPA_SANITIZE_NO_CLUSTER") == "1"


def qkv(d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(1, 4, L, d, device="cuda", dtype=dt, generator=g)
    k = torch.randn(1, 2, S, d, device="cuda", dtype=dt, generator=g)
    v = torch.randn(1, 2, S, d, device="cuda", dtype=dt, generator=g)
    return q, k, v


def masks():
    # 64x64 blocks in a checkerboard (whole tiles masked: the kernels' block-map skip), one fully
    # masked row, and a (B, 1, 1, S) padding mask broadcast over heads and queries.
    i = torch.arange(L, device="cuda").unsqueeze(-1) // 64
    j = torch.arange(S, device="cuda") // 64
    block = ((i + j) % 2 == 0).view(1, 1, L, S).clone()
    block[..., 5, :] = False
    padding = (torch.arange(S, device="cuda") < S - 20).view(1, 1, 1, S)
    return block, padding


def run(q, k, v, **kw):
    out = ffpa_attn.forward(q, k, v, enable_gqa=True, strict=True, **kw)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()


for level in (1, 2, 3) if "ffpa" in PARTS else ():
    dims = info["head_dims"].get(f"ffpa_l{level}", [])
    dims = [d for d in dims if d <= (640 if NO_CLUSTER and level == 1 else 1024)]
    for d in sorted({dims[0], dims[-1]} if dims else set()):
        q, k, v = qkv(d, d)
        for causal in (False, True):
            run(q, k, v, is_causal=causal, level=level)  # auto depth: L1 on Hopper is the TMA kernel
            for stages in (1, 2, 3, 4):
                smem = C.kernel_info(str(dt).split(".")[-1], f"ffpa_l{level}", d, d, stages)["smem_bytes"]
                if smem <= torch.cuda.get_device_properties(0).shared_memory_per_block_optin:
                    run(q, k, v, is_causal=causal, level=level, num_stages=stages)
        run(q, k, v, is_causal=True, causal_align="bottom_right", level=level)
        run(q, k[:, :, :40], v[:, :, :40], is_causal=True, causal_align="bottom_right", level=level)
        for mask in masks():
            run(q, k, v, attn_mask=mask, level=level)
        if "fp16" in info.get("accs", {}).get(f"ffpa_l{level}", {}).get("float16", []):
            h = [t.half() for t in (q, k, v)]
            run(*h, is_causal=True, level=level, acc="fp16")
            run(*h, level=level, acc="mixed")

# L1 on Hopper, causal with 64 query blocks or more: pairs of query blocks as clusters sharing K loads
# (multicast, cluster-scope releases: not under racecheck, as above); 65 blocks, so the last pair has a
# block past L.
l1 = [d for d in info["head_dims"].get("ffpa_l1", []) if d <= 640]
if l1 and "ffpa" in PARTS and not NO_CLUSTER:
    g = torch.Generator(device="cuda").manual_seed(4)
    q = torch.randn(1, 2, 4100, l1[0], device="cuda", dtype=dt, generator=g)
    k, v = (torch.randn(1, 1, 4200, l1[0], device="cuda", dtype=dt, generator=g) for _ in range(2))
    run(q, k, v, is_causal=True, level=1)
    run(q, k, v, is_causal=True, causal_align="bottom_right", level=1)

l3 = [d for d in info["head_dims"].get("ffpa_l3", []) if d <= 1024]
if l3 and "ffpa" in PARTS:  # 2 x 48 heads x 2 query blocks = 192 items > the resident blocks of a 132-SM H100
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(2, 48, L, l3[0], device="cuda", dtype=dt, generator=g)
    k = torch.randn(2, 24, S, l3[0], device="cuda", dtype=dt, generator=g)
    v = torch.randn(2, 24, S, l3[0], device="cuda", dtype=dt, generator=g)
    for causal in (False, True):
        run(q, k, v, is_causal=causal, level=3)

fa2 = info["head_dims"].get("fa2", [])
# Both FA-2 kernels where the GPU has two (auto = wgmma on compute capability 9.0: the
# warp-specialised TMA kernel, and mma.sync), one head dim per tile-table row; on
# the wgmma path also the kernel the launcher falls back to (an explicit num_stages, and K/V
# broadcast over the batch: stride 0, which TMA cannot describe): cp.async wgmma up to 256, mma.sync
# past it (with a mask on the TMA kernel's blocks).
for mode in ("auto", "sync") if "fa2" in PARTS else ():
    ffpa_attn.set_fa2_mma(mode)
    # 32, 64, 96: O stored by TMA on Hopper (96: on the masked tile); 32, 64 non-causal: S = 131 keys on the
    # short-keys tile (one key tile an item, launch/heuristics.h fa2_short_tile); 320, 384: P@V in two wgmmas
    for d in [d for d in (32, 64, 96, 128, 192, 256, 320, 384) if d in fa2]:
        q, k, v = qkv(d, d)
        for causal in (False, True):
            run(q, k, v, is_causal=causal)
        run(q, k, v, is_causal=True, causal_align="bottom_right")
        # L > S bottom-right: the first L - 40 rows see no key (out 0, lse -inf)
        run(q, k[:, :, :40], v[:, :, :40], is_causal=True, causal_align="bottom_right")
        for mask in masks():
            run(q, k, v, attn_mask=mask)
        if mode == "auto":
            run(q, k, v, is_causal=True, num_stages=2)
            q2 = torch.cat([q, q])
            run(q2, k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1), is_causal=True)
            if d > 256:
                run(q, k, v, attn_mask=masks()[0], num_stages=2)
        if mode == "auto" and d in (64, 128):
            # More work slots than SMs: the persistent blocks take items from the op's work counter
            # and the producer announces each to the consumers (the item words beside Q's slot).
            hq = 2 * torch.cuda.get_device_properties(0).multi_processor_count + 2
            qm = torch.randn(1, hq, L, d, device="cuda", dtype=dt, generator=torch.Generator(device="cuda").manual_seed(7))
            for causal in (False, True):
                run(qm, k, v, is_causal=causal)
            if C.fa2_ws_look_ahead(d, 1030) or (d == 128 and C.fa2_ws_pf_pair(1030)):
                # Long keys: the look-ahead kernel (launch/heuristics.h fa2_ws_look_ahead; the next item's
                # first S issued before the epilogue), a negative scale flipping the next item's Q there; at
                # D = 128 the kernel with P in two register buffers (fa2_ws_pf_pair).
                g = torch.Generator(device="cuda").manual_seed(8)
                kl, vl = (torch.randn(1, 2, 1030, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
                for causal in (False, True):
                    run(qm, kl, vl, is_causal=causal, scale=-0.1 if causal else None)
            # The split tail (launch/heuristics.h fa2_split_tail): one query block on SMs + 9 heads against
            # 4100 keys, so every slot is a share of key tiles and the cut items' warps merge their partials.
            hs = torch.cuda.get_device_properties(0).multi_processor_count + 9
            g = torch.Generator(device="cuda").manual_seed(9)
            qs = torch.randn(1, hs, 100, d, device="cuda", dtype=dt, generator=g)
            ks, vs = (torch.randn(1, 1, 4100, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
            run(qs, ks, vs)
ffpa_attn.set_fa2_mma("auto")

# Split-KV decode: the smallest and largest compiled pairs and MLA; contiguous and paged (page 16)
# caches, lengths 0 / 1 / odd / full, GQA 4 (the mma.sync kernel) and 32 (96 rows per KV head: the
# wgmma kernel on Hopper at FFPA head dims), Lq 3 causal and not, one split and three (the merge: a
# block per row where there are few rows, a warp per row at the largest pair's 96 x 8 column blocks;
# and fused into the split kernel: the last split block of a row block merges it). The split calls
# take their sequences longest first (set_decode_order: each block ranks the lengths in shared memory),
# the one-split calls in launch order (one wave: auto).
SPLIT_MERGES = ((1, "auto"), (3, "kernel"), (3, "fused"))


def set_split_modes(splits, merge):
    C.set_decode_merge(merge)
    C.set_decode_order("auto" if splits == 1 else "longest")


dec = sorted(tuple(p) for p in info["head_dim_pairs"].get("decode", []))
cases = [(d, dv, hq) for d, dv in sorted({dec[0], dec[-1]} | ({(576, 512)} & set(dec))) for hq in (8, 64)] if dec else []
for d, dv, hq in cases if "decode" in PARTS else ():
    g = torch.Generator(device="cuda").manual_seed(d)
    q = torch.randn(4, 3, hq, d, device="cuda", dtype=dt, generator=g)
    kc = torch.randn(4, 160, 2, d, device="cuda", dtype=dt, generator=g)
    vc = torch.randn(4, 160, 2, dv, device="cuda", dtype=dt, generator=g)
    lens = torch.tensor([160, 0, 1, 77], dtype=torch.int32, device="cuda")
    table = torch.randperm(40, device="cuda", generator=g).view(4, 10).to(torch.int32)
    pk = kc.reshape(40, 16, 2, d)
    pv = vc.reshape(40, 16, 2, dv)
    for causal in (False, True):
        for splits, merge in SPLIT_MERGES:
            set_split_modes(splits, merge)
            for args in ((kc, vc, None), (pk, pv, table)):
                out = ffpa_attn.decode(q, args[0], args[1], block_table=args[2], cache_seqlens=lens, causal=causal,
                                       num_splits=splits, strict=True)
                torch.cuda.synchronize()
                assert torch.isfinite(out).all()
# MLA's single cache (V a view of K) with 16, 64 and 128 rows per KV head: on Hopper the narrow
# (transposed) kernel and the MLA kernel (one and two row blocks); the narrow kernel's spread merge.
if (576, 512) in set(dec) and "decode" in PARTS:
    g = torch.Generator(device="cuda").manual_seed(576)
    kc = torch.randn(4, 160, 1, 576, device="cuda", dtype=dt, generator=g)
    pk = kc.reshape(40, 16, 1, 576)
    table = torch.randperm(40, device="cuda", generator=g).view(4, 10).to(torch.int32)
    lens = torch.tensor([160, 0, 1, 77], dtype=torch.int32, device="cuda")
    for hq in (16, 64, 128):
        q = torch.randn(4, 1, hq, 576, device="cuda", dtype=dt, generator=g)
        for splits, merge in SPLIT_MERGES:
            set_split_modes(splits, merge)
            for cache, tab in ((kc, None), (pk, table)):
                out = ffpa_attn.decode(q, cache, cache[..., :512], block_table=tab, cache_seqlens=lens, num_splits=splits,
                                       strict=True)
                torch.cuda.synchronize()
                assert torch.isfinite(out).all()
    # The narrow kernel's spread merge (a cooperative launch: the split blocks of a row block wait for each
    # other, then each merges a slice of the columns), 3 splits, contiguous and paged.
    q = torch.randn(4, 1, 16, 576, device="cuda", dtype=dt, generator=g)
    C.set_decode_order("launch")
    C.set_decode_merge("spread")
    for cache, tab in ((kc, None), (pk, table)):
        out = ffpa_attn.decode(q, cache, cache[..., :512], block_table=tab, cache_seqlens=lens, num_splits=3, strict=True)
        torch.cuda.synchronize()
        assert torch.isfinite(out).all()
C.set_decode_merge("auto")
C.set_decode_order("auto")
# The FP8 kernel (Hopper): each head dim, causal both alignments and not, the two masks, GQA, per-head
# descales, tails in L and S (its V^T pre-pass zero-fills past S); at D = 64 and 128 also the form that
# transposes V itself (set_fp8_v_transpose("kernel"): TMA's zero fill past S, the transposer warps).
fp8_dims = info["head_dims"].get("fp8", []) if torch.cuda.get_device_capability() == (9, 0) else []
for d in fp8_dims if "fp8" in PARTS else ():
    q, k, v = qkv(d, 8 + d)
    (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
    for form in ("prepass", "kernel") if d <= 128 else ("prepass",):
        C.set_fp8_v_transpose(form)
        for causal, align in ((False, "top_left"), (True, "top_left"), (True, "bottom_right")):
            run(q8, k8, v8, is_causal=causal, causal_align=align, q_descale=qd, k_descale=kd, v_descale=vd)
        for mask in masks():  # skipped, partial and full tiles of the block map; a fully masked row
            run(q8, k8, v8, attn_mask=mask, q_descale=qd, k_descale=kd, v_descale=vd)
    if d <= 256:  # 140 items on a grid of one block an SM: blocks walking two items (Q refilled, the rings running on)
        g = torch.Generator(device="cuda").manual_seed(d)
        q = torch.randn(1, 140, 100, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(1, 35, 130, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
        for form in ("prepass", "kernel") if d <= 128 else ("prepass",):
            C.set_fp8_v_transpose(form)
            run(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
        # causal: 140 heads x 4-5 query blocks, 630 keys: pairs of query blocks over two rounds (fp8_causal_walk)
        q = torch.randn(1, 140, 600, d, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(1, 35, 630, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
        (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
        for form in ("prepass", "kernel") if d <= 128 else ("prepass",):
            C.set_fp8_v_transpose(form)
            run(q8, k8, v8, is_causal=True, causal_align="bottom_right", q_descale=qd, k_descale=kd, v_descale=vd)
C.set_fp8_v_transpose("auto")
if 512 in fp8_dims and "fp8" in PARTS and not NO_CLUSTER:  # D = 512 causal, 129 query blocks: K-sharing pairs
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(1, 1, 8200, 512, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(1, 1, 8300, 512, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
    run(q8, k8, v8, is_causal=True, causal_align="bottom_right", q_descale=qd, k_descale=kd, v_descale=vd)
print("sanitize_one: done")
