"""Convolution and pooling kernels over (N, C, H, W) inputs read through their strides.

- `im2col`: one invocation per element of the column matrix cols[n, (c, ki, kj), (oh, ow)] =
  x[n, c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw] (0 outside the input: zero padding without a
  padded copy). The convolution is then one batched GEMM (ops/conv.py), groups as a batch dim.
- `pool2d`: one invocation per output, a loop over its window: max (value and the flat index
  h*W + w in the input plane, NaN propagating as PyTorch), avg (count_include_pad,
  divisor_override), adaptive avg / max (window [floor(o*H/OH), ceil((o+1)*H/OH))).
1-D ops run these with H = 1.

Info words (i32), both kernels:
  [0] outputs  [1] C  [2] H  [3] W  [4] KH  [5] KW  [6] OH  [7] OW  [8] sh  [9] sw  [10] ph
  [11] pw  [12] dh  [13] dw  [14] x offset  [15] x n-stride  [16] c-stride  [17] h-stride
  [18] w-stride; pool only: [19] count_include_pad  [20] divisor_override (0: none)
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load, store


@lru_cache(maxsize=64)
def im2col(stype: str) -> KernelSource:
    ct = "i32" if stype == "i32" else "f32"
    zero = "0" if ct == "i32" else "0.0"
    body = f"""{FLAT_INDEX.format(wg=WG)}  if (gi >= info[0]) {{ return; }}
  // gi over (n, c, ki, kj, oh, ow), row-major
  var r = gi;
  let ow = r % info[7]; r = r / info[7];
  let oh = r % info[6]; r = r / info[6];
  let kj = r % info[5]; r = r / info[5];
  let ki = r % info[4]; r = r / info[4];
  let c = r % info[1]; let n = r / info[1];
  let y = oh * info[8] - info[10] + ki * info[12];
  let x = ow * info[9] - info[11] + kj * info[13];
  var v: {ct} = {zero};
  if (y >= 0 && y < info[2] && x >= 0 && x < info[3]) {{
    v = {load("xin[info[14] + n * info[15] + c * info[16] + y * info[17] + x * info[18]]", stype, ct)};
  }}
  cols[gi] = {store("v", ct, stype)};
}}
"""
    src = header([("xin", stype, "r"), ("cols", stype, "w")]) + ENTRY.format(wg=WG) + body
    return KernelSource(src, "rw")


@lru_cache(maxsize=64)
def pool2d(mode: str, stype: str) -> KernelSource:
    """mode: "max", "avg", "adaptive_avg", "adaptive_max"."""
    is_max = mode.endswith("max")
    adaptive = mode.startswith("adaptive")
    ct = "f32"
    L = [
        FLAT_INDEX.format(wg=WG),
        "  if (gi >= info[0]) { return; }",
        "  let ow = gi % info[7]; let oh = (gi / info[7]) % info[6];",
        "  let nc = gi / (info[7] * info[6]); let n = nc / info[1]; let c = nc % info[1];",
        "  let base = info[14] + n * info[15] + c * info[16];",
        "  let H = info[2]; let W = info[3];",
    ]
    if adaptive:
        L += [
            "  let h0 = (oh * H) / info[6]; let h1 = ((oh + 1) * H + info[6] - 1) / info[6];",
            "  let w0 = (ow * W) / info[7]; let w1 = ((ow + 1) * W + info[7] - 1) / info[7];",
            "  let dh = 1; let dw = 1;",
        ]
    else:
        L += [
            "  let h0 = oh * info[8] - info[10]; let w0 = ow * info[9] - info[11];",
            "  let dh = info[12]; let dw = info[13];",
            "  let h1 = h0 + (info[4] - 1) * dh + 1; let w1 = w0 + (info[5] - 1) * dw + 1;",
        ]
    if is_max:
        L += [
            "  var best = -p_inf(); var arg = -1;",
            "  for (var y = h0; y < h1; y += dh) {",
            "    if (y < 0 || y >= H) { continue; }",
            "    for (var x = w0; x < w1; x += dw) {",
            "      if (x < 0 || x >= W) { continue; }",
            f"      let v = {load('xin[base + y * info[17] + x * info[18]]', stype, ct)};",
            "      if (arg < 0 || v > best || (p_isnan(v) && !p_isnan(best))) { best = v; arg = y * W + x; }",
            "    }",
            "  }",
            f"  out[gi] = {store('best', ct, stype)};",
            "  idx[gi] = arg;",
        ]
        bufs = [("xin", stype, "r"), ("out", stype, "w"), ("idx", "i32", "w")]
    else:
        L += [
            "  var acc = 0.0;",
            "  let ys = max(h0, 0); let ye = min(h1, H); let xs = max(w0, 0); let xe = min(w1, W);",
            "  for (var y = ys; y < ye; y++) {",
            "    for (var x = xs; x < xe; x++) {",
            f"      acc += {load('xin[base + y * info[17] + x * info[18]]', stype, ct)};",
            "    }",
            "  }",
        ]
        if adaptive:
            L.append("  let cnt = f32((h1 - h0) * (w1 - w0));")
        else:
            # PyTorch: with count_include_pad the window is clipped to the padded input only
            L += [
                "  let ph_end = min(h1, H + info[10]); let pw_end = min(w1, W + info[11]);",
                "  var cnt = f32((ye - ys) * (xe - xs));",
                "  if (info[19] != 0) { cnt = f32((ph_end - h0) * (pw_end - w0)); }",
                "  if (info[20] != 0) { cnt = f32(info[20]); }",
            ]
        L.append(f"  out[gi] = {store('acc / cnt', ct, stype)};")
        bufs = [("xin", stype, "r"), ("out", stype, "w")]
    body = "\n".join(L) + "\n}\n"
    src = header(bufs) + helpers_for(body) + ENTRY.format(wg=WG) + body
    return KernelSource(src, "".join(m for _, _, m in bufs))
