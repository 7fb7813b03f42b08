"""A/B of building kernels without the implementation's run-time index checks (wgpu-native's
`wgpuDeviceCreateShaderModuleTrusted`, backend/capi.py `trusted_module`): GPU time by timestamp
queries (scripts/gpu_time.py) of the GEMMs, attention and row ops, each mode in a process of its
own (PYRITE_TRUSTED=0: every kernel checked; 1: the kernels marked kernels/common.TRUSTED;
all: every kernel unchecked, an upper bound).
Dawn's counterpart is a device toggle (backend/select.py DAWN_TOGGLES): `--modes` takes
environment settings instead, one a mode, separated by ";", e.g.
`--modes "PYRITE_DAWN_TOGGLES=none;PYRITE_DAWN_TOGGLES=disable_robustness"`.
`PYRITE_BACKEND=wgpu python scripts/trusted_ab.py [--modes 0,1,all] [--json PATH] [--quick]`"""

import json
import os
import subprocess
import sys

import numpy as np

F = None


def cases(quick=False):
    import pyrite as pr

    global F
    F = pr.nn.functional
    rng = np.random.default_rng(0)

    def t(*shape, grad=False):
        x = pr.tensor(rng.standard_normal(shape).astype(np.float32))
        return x.requires_grad_() if grad else x

    out = []
    d = 16 if quick else 1  # --quick: shapes cut down, a check that the script runs
    for M, N, K in ((4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072), (128, 768, 768)):
        M, N, K = M // d, N // d * 4 if d > 1 else N, K // d * 4 if d > 1 else K
        x, w, b = t(M, K), t(N, K), t(N)
        out.append((f"linear {M}x{K}.{N}x{K}T+b", lambda x=x, w=w, b=b: F.linear(x, w, b)))
    a, b = t(4096 // d, 4096 // d), t(4096 // d, 4096 // d)
    out.append(("matmul 4096^3", lambda: a @ b))
    for label, (B, H, L, E), causal in (
        ("attn BERT-base", (32, 12, 128, 64), False),
        ("attn causal 4096", (1, 16, 4096, 64), True),
        ("attn causal E=128 512", (1, 32, 512, 128), True),
    ):
        B, L = max(1, B // d), max(64, L // d)
        q, k, v = (t(B, H, L, E, grad=True) for _ in range(3))
        keep = np.ones((B, 1, 1, L), dtype=bool)
        keep[..., L - L // 4 :] = False
        kw = {"is_causal": True} if causal else {"attn_mask": pr.tensor(keep)}
        out.append((label + " fwd", lambda q=q, k=k, v=v, kw=kw: F.scaled_dot_product_attention(
            q, k, v, **kw)))  # fmt: skip
        o = F.scaled_dot_product_attention(q, k, v, **kw)
        g = t(B, H, L, E)
        out.append((label + " bwd", lambda o=o, q=q, k=k, v=v, g=g: pr.autograd.grad(
            o, (q, k, v), g, retain_graph=True)))  # fmt: skip
    x = t(65536 // d, 1024)
    out.append(("softmax 65536x1024", lambda: F.softmax(x, -1)))
    out.append(("layer_norm 65536x1024", lambda: F.layer_norm(x, (1024,))))
    return out


def child():
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from gpu_time import kernel_times

    res = {}
    for label, fn in cases("--quick" in sys.argv):
        fn()
        res[label] = sum(t for t, *_ in kernel_times(fn, reps=9)) / 1e3
    print("JSON " + json.dumps(res))


def main():
    if "--child" in sys.argv:
        return child()
    modes = "0,1,all"
    if "--modes" in sys.argv:
        modes = sys.argv[sys.argv.index("--modes") + 1]
    modes = modes.split(";") if "=" in modes else [f"PYRITE_TRUSTED={m}" for m in modes.split(",")]
    got = {}
    for m in modes:
        env = dict(os.environ)
        for kv in m.split(" "):
            k, v = kv.split("=", 1)
            env[k] = v
        args = [sys.executable, __file__, "--child"] + (
            ["--quick"] if "--quick" in sys.argv else []
        )
        p = subprocess.run(args, env=env, capture_output=True,
                           text=True)  # fmt: skip
        line = [x for x in p.stdout.splitlines() if x.startswith("JSON ")]
        if not line:
            print(f"mode {m} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
            continue
        got[m] = json.loads(line[0][5:])
    labels = next(iter(got.values())).keys() if got else []
    for i, m in enumerate(got):
        print(f"mode {i}: {m}")
    print(f"{'GPU µs':<32}" + "".join(f"{'mode ' + str(i):>20}" for i in range(len(got))))
    for lab in labels:
        base = got[modes[0]][lab] if modes[0] in got else None
        cells = ""
        for m in got:
            v = got[m][lab]
            r = f" ({base / v:4.2f}x)" if base and m != modes[0] else ""
            cells += f"{v:>12.1f}{r:>8}"
        print(f"{lab:<32}{cells}")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(got, f, indent=1)


if __name__ == "__main__":
    main()
