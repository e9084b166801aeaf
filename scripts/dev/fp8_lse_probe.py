"""Development probe (#17): the FP8 kernel's LSE and output error against a float64 reference on the
dequantized inputs, for randn keys and for keys whose score spread ramps x1 .. x2.5 and jumps x4 in the last
quarter (tests/_reference.py rising_then_jumping_keys: scores up to ~10x randn's). Session 33 saw the LSE of
D = 256 / 512 rows off by 0.037-0.038 on the ramp (D = 128 within 2e-2): run it on two trees (PYTHONPATH) to
see whether the lazy row max or the magnitude of the dot products is what it grows with.
    PYTHONPATH=<tree> python3 scripts/dev/fp8_lse_probe.py [D ...]"""
import sys

import torch

import ffpa_attn


def ramp(k, top, jump):
    S = k.shape[2]
    r = torch.linspace(1.0, top, S, device=k.device)
    r[3 * S // 4:] *= jump
    return k * r[:, None]


def main():
    dims = [int(x) for x in sys.argv[1:]] or [128, 256, 512]
    for D in dims:
        for name, top, jump in (("randn", 1.0, 1.0), ("ramp x1.5 jump x2", 1.5, 2.0), ("ramp x2.5 jump x4", 2.5, 4.0)):
            g = torch.Generator(device="cuda").manual_seed(D + 5)
            q, k, v = (torch.randn(2, h, n, D, device="cuda", generator=g) for h, n in ((4, 300), (2, 1500), (2, 1500)))
            (q8, qd), (k8, kd), (v8, vd) = (ffpa_attn.quantize_fp8(t) for t in (q, ramp(k, top, jump), v))
            try:
                out, lse = ffpa_attn.forward(q8, k8, v8, enable_gqa=True, q_descale=qd, k_descale=kd, v_descale=vd,
                                             return_lse=True, strict=True)
            except Exception as e:  # noqa: BLE001 (a dim this build lacks)
                print(f"D={D} {name}: {type(e).__name__}: {str(e)[:80]}")
                break
            qf, kf, vf = (x8.double() * d.double()[..., None, None] for x8, d in ((q8, qd), (k8, kd), (v8, vd)))
            kf, vf = (t.repeat_interleave(2, dim=1) for t in (kf, vf))
            s = qf @ kf.transpose(-1, -2) / D ** 0.5
            want_lse = torch.logsumexp(s, dim=-1)
            want = torch.softmax(s, dim=-1) @ vf
            rel = ((out.double() - want).pow(2).mean().sqrt() / want.pow(2).mean().sqrt()).item()
            print(f"D={D} {name}: |lse error| max {(lse.double() - want_lse).abs().max().item():.4f} "
                  f"(|lse| max {want_lse.abs().max().item():.1f}), output rel RMSE {rel:.2e}")


if __name__ == "__main__":
    main()
