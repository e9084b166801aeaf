import os, sys, torch, ffpa_attn
H = int(sys.argv[1]); form = sys.argv[2]; D = int(sys.argv[3]) if len(sys.argv) > 3 else 64
ffpa_attn._C.set_fp8_v_transpose(form)
g = torch.Generator(device="cuda").manual_seed(0)
q = torch.randn(1, H, 100, D, device="cuda", generator=g); k, v = (torch.randn(1, H, 130, D, device="cuda", generator=g) for _ in range(2))
(q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, k, v))
out = ffpa_attn.forward(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd, strict=True)
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(*(x8.float() * d[..., None, None] for x8, d in ((q8, qd), (k8, kd), (v8, vd))))
err = (out.float() - ref).abs().amax(dim=(0, 2, 3))
bad = [h for h in range(H) if err[h] > 0.05]
print(f"H={H} {form} D={D} dev={os.environ.get('FFPA_DEV_WS')}: max err {err.max().item():.3e}, bad heads {bad[:12]} ({len(bad)})", flush=True)
if H == 133:  # block 0 walks items 0 and 132: which operand of item 132 is stale?
    deq = [x8.float() * d[..., None, None] for x8, d in ((q8, qd), (k8, kd), (v8, vd))]
    Q, K, V = deq
    sd = torch.nn.functional.scaled_dot_product_attention
    o = out.float()[:, 132]
    for name, (a, b, c) in {"right": (Q[:, 132], K[:, 132], V[:, 132]), "stale Q": (Q[:, 0], K[:, 132], V[:, 132]),
                            "stale K": (Q[:, 132], K[:, 0], V[:, 132]), "stale V": (Q[:, 132], K[:, 132], V[:, 0]),
                            "stale KV": (Q[:, 132], K[:, 0], V[:, 0])}.items():
        print(f"  item 132 against {name}: {(o - sd(a[:, None], b[:, None], c[:, None])[:, 0]).abs().max().item():.3e}")
    o0 = out.float()[:, 0]
    print(f"  item 0 right: {(o0 - sd(Q[:, :1], K[:, :1], V[:, :1])[:, 0]).abs().max().item():.3e}")
