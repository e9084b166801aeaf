#!/usr/bin/env python3
"""Markdown table of what each compiled kernel launches with, read from the installed extension on
a GPU (ffpa_attn._C.kernel_info with query_attributes): tile, threads, default pipeline depth,
shared memory per block, registers and local (spill) bytes per thread, per family / level and
accumulation mode. This is where a reader checks the O(1) claims: L2 and L3 rows keep the same
shared memory (and L3 the same registers) from D = 320 to 4096. The Hopper L1 rows up to Dv = 640 give
the worse registers and local bytes of the lone kernel and its K-sharing variant (causal calls with
many query blocks). Used by scripts/gpu_check.sh."""
import ffpa_attn
import ffpa_attn._C as C


def main():
    info = ffpa_attn.build_info()
    print("| kernel | mma | dtype | acc | D | Dv | Br | Bc | chunk | Dv per block | threads | stages | "
          "smem/block (B) | registers | local (B) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for family in info["families"]:
        for dt, accs in sorted(info["accs"][family].items()):
            for acc in ("fp32", "fp16", "mixed"):
                if acc not in accs:
                    continue
                for e, ev in sorted(tuple(p) for p in info["head_dim_pairs"][family]):
                    # FA-2: the kernel auto runs here, then the mma.sync one where auto is wgmma.
                    seen = set()
                    for mode in (("auto", "sync") if family == "fa2" else ("auto",)):
                        ffpa_attn.set_fa2_mma(mode)
                        try:
                            k = C.kernel_info(dt, family, e, ev, 0, True, acc)
                        except ValueError as err:
                            # A family's pairs and accumulation modes are unions over its lines (FFPA L1's
                            # Hopper line has 2048 / 4096 in fp32 only): skip the combinations not built.
                            if "is not compiled" not in str(err):
                                raise
                            continue
                        finally:
                            ffpa_attn.set_fa2_mma("auto")
                        if k["mma"] in seen:
                            continue
                        seen.add(k["mma"])
                        print(f"| {family} | {k['mma']} | {dt} | {acc} | {e} | {ev} | {k['block_m']} | {k['block_n']} | "
                              f"{k['chunk_d']} | {k['group_d']} | {k['threads']} | {k['num_stages']} | "
                              f"{k['smem_bytes']} | {k['registers']} | {k['local_bytes']} |")


if __name__ == "__main__":
    main()
