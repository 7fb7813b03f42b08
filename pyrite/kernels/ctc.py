"""CTC loss: the forward (alpha) recursion of Graves et al. (2006) in log space.

For batch item n with target l (length L) and the extended label sequence l' = (blank, l1,
blank, l2, ..., lL, blank) of S' = 2L + 1 symbols:
  alpha_0(0) = lp[0, blank],  alpha_0(1) = lp[0, l1],  alpha_0(s) = -inf for s >= 2
  alpha_t(s) = lp[t, l'_s] + logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2))
               (the s-2 term only where l'_s is not blank and l'_s != l'_{s-2})
  loss = -logsumexp(alpha_{T_n-1}(S'-1), alpha_{T_n-1}(S'-2))

Two kernels walk the time steps in order; the states live in a storage scratch `alpha`, so any
target length fits:
- workgroup (GPUs): one workgroup per batch item, its invocations sharing the S' states of a
  step (invocation lid takes s = lid, lid + WG, ...); the two most recent steps in (N, 2, S'max)
  (step t in slot t % 2), a storage barrier between steps. Steps t >= T_n write nothing, so
  slot (T_n - 1) % 2 still holds the item's last step when the loss is read.
- serial (CPU adapters): one invocation per batch item updates its row of (N, S'max) in place,
  s descending (alpha[s-1], alpha[s-2] still hold step t-1 when alpha[s] is written): no
  barriers, which lavapipe runs by switching between the group's invocations at each one.
A dispatch runs the steps [t0, t1): the op sizes that range so that each invocation's loop
iterations, (t1 - t0)·(passes + 2) (a step's inner passes, the inner loop's exit test and the
outer back edge: lavapipe counts all three), stay within the device's loop budget (lavapipe:
65,535 in all), and chains dispatches over T; the dispatch that reaches the last step writes
each item's loss.

Bindings: lp (log_probs, read through its strides), tg (targets, i32), items (i32 (N, 3):
T_n, L_n, offset of item n's first target in tg), alpha (scratch), loss (N,).
Info words (i32):
  [0] N  [1] S'max  [2] t0  [3] t1  [4] last (1: write the losses)  [5] blank
  [6] lp offset  [7] lp stride T  [8] lp stride N  [9] lp stride C  [10] target stride
"""

from __future__ import annotations

from functools import lru_cache

from .common import KernelSource, header, helpers_for, load


def workgroup_size(s_max: int) -> int:
    """Invocations per batch item: the power of two covering S'max, 32 to 256."""
    wg = 32
    while wg < s_max and wg < 256:
        wg *= 2
    return wg


def _helpers(lp_type: str) -> str:
    """label(s), the log-sum-exps (-inf safe) and the strided log-probability read."""
    lp_at = load("lp[info[6] + t * info[7] + n * info[8] + c * info[9]]", lp_type, "f32")
    return f"""
fn label(s: i32, toff: i32, blank: i32) -> i32 {{
  if ((s & 1) == 0) {{ return blank; }}
  return tg[toff + ((s - 1) / 2) * info[10]];
}}

fn lse2(a: f32, b: f32) -> f32 {{
  let m = max(a, b);
  if (m == -p_inf()) {{ return m; }}
  return m + log(exp(a - m) + exp(b - m));
}}

fn lse3(a: f32, b: f32, c: f32) -> f32 {{
  let m = max(max(a, b), c);
  if (m == -p_inf()) {{ return m; }}
  return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}}

fn lp_at(t: i32, n: i32, c: i32) -> f32 {{
  return {lp_at};
}}
"""


# the final read of an item's loss, shared by both kernels (`last`: its last step's states)
_LOSS = """
    if (tn == 0) {
      // no frames: probability 1 of the empty target, 0 of any other
      loss[n] = select(p_inf(), 0.0, ln == 0);
    } else {
      var ll = alpha[last + sp - 1];
      if (sp >= 2) { ll = lse2(ll, alpha[last + sp - 2]); }
      loss[n] = -ll;
    }
"""

# batch item n's sizes (T_n, L_n, its targets' offset, S') and the info words both kernels read
_ITEM = """  let sp_max = info[1];
  let blank = info[5];
  let tn = items[3 * n];
  let ln = items[3 * n + 1];
  let toff = items[3 * n + 2];
  let sp = 2 * ln + 1;
"""


def _from_prev(row: str, indent: int) -> str:
    """`acc` = the log-sum-exp of step t-1's states s, s-1 (and s-2 where l'_s allows it), read
    from `row` of alpha; `indent` spaces before each line."""
    lines = f"""var acc = alpha[{row} + s];
if (s >= 1) {{
  let a1 = alpha[{row} + s - 1];
  if (s >= 2 && l != blank && l != label(s - 2, toff, blank)) {{
    acc = lse3(acc, a1, alpha[{row} + s - 2]);
  }} else {{
    acc = lse2(acc, a1);
  }}
}}
"""
    return "".join(" " * indent + line for line in lines.splitlines(True))


_BUFFERS = (
    ("lp", None, "r"),
    ("tg", "i32", "r"),
    ("items", "i32", "r"),
    ("alpha", "f32", "w"),
    ("loss", "f32", "w"),
)


def _header(lp_type):
    return header([(name, t or lp_type, m) for name, t, m in _BUFFERS])


@lru_cache(maxsize=16)
def ctc_alpha_kernel(lp_type: str, wg: int) -> KernelSource:
    """The workgroup kernel: one workgroup per batch item, its invocations over the states."""
    body = f"""
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let n = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);
  if (n >= info[0]) {{ return; }}  // uniform: the whole workgroup leaves
{_ITEM}  let base = n * 2 * sp_max;
  let neg_inf = -p_inf();
  for (var t = info[2]; t < info[3]; t++) {{
    let cur = base + (t & 1) * sp_max;
    let prev = base + ((t + 1) & 1) * sp_max;
    if (t < tn) {{
      for (var s = i32(lid.x); s < sp; s += {wg}) {{
        let l = label(s, toff, blank);
        let e = lp_at(t, n, l);
        var a = neg_inf;
        if (t == 0) {{
          if (s < 2) {{ a = e; }}
        }} else {{
{_from_prev("prev", 10)}          a = acc + e;
        }}
        alpha[cur + s] = a;
      }}
    }}
    storageBarrier();
  }}
  if (info[4] != 0 && lid.x == 0u) {{
    let last = base + ((tn - 1) & 1) * sp_max;
    {_LOSS}
  }}
}}
"""
    text = _helpers(lp_type) + body
    return KernelSource(_header(lp_type) + helpers_for(text, "p_inf()") + text, "rrrww")


@lru_cache(maxsize=16)
def ctc_alpha_serial_kernel(lp_type: str, wg: int = 8) -> KernelSource:
    """The serial kernel: one invocation per batch item walks its states itself, in place in
    one row of `alpha` (descending s, so alpha[s-1] and alpha[s-2] still hold step t-1 when
    alpha[s] is updated): no barriers. For CPU adapters (see ops' choice)."""
    body = f"""
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let n = i32(((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * {wg}u + lid.x);
  if (n >= info[0]) {{ return; }}
{_ITEM}  let base = n * sp_max;
  for (var t = info[2]; t < min(info[3], tn); t++) {{
    if (t == 0) {{
      for (var s = 0; s < sp; s++) {{
        alpha[base + s] = select(-p_inf(), lp_at(0, n, label(s, toff, blank)), s < 2);
      }}
    }} else {{
      for (var s = sp - 1; s >= 0; s--) {{
        let l = label(s, toff, blank);
{_from_prev("base", 8)}        alpha[base + s] = acc + lp_at(t, n, l);
      }}
    }}
  }}
  if (info[4] != 0) {{
    let last = base;
    {_LOSS}
  }}
}}
"""
    text = _helpers(lp_type) + body
    return KernelSource(_header(lp_type) + helpers_for(text, "p_inf()") + text, "rrrww")


def info_words() -> int:
    return 11


# ---- the backward's tables: every step's alpha (or beta), for the gradient -------------------
# beta, Graves' backward recursion in torch's convention (it includes step t's emission, as
# alpha does, so alpha_t(s) + beta_t(s) - lp[t, l'_s] is the log-probability of the paths
# through state s at step t):
#   beta_{T_n-1}(S'-1) = lp[T_n-1, blank],  beta_{T_n-1}(S'-2) = lp[T_n-1, lL], else -inf
#   beta_t(s) = lp[t, l'_s] + logsumexp(beta_{t+1}(s), beta_{t+1}(s+1), beta_{t+1}(s+2))
#               (the s+2 term only where l'_s is not blank and l'_s != l'_{s+2})
# The table kernels write step t of item n at row (t * N + n) of a (T, N, S'max) table the op
# filled with -inf (steps t >= T_n and states s >= S'_n stay -inf). A dispatch runs the steps
# k in [k0, k1): alpha's step k is t = k, beta's t = T_n - 1 - k (each item's own last step
# first), so one chain of dispatches over k < max T_n serves every item.
# Info words as the forward's ([4] unused).


def _from_next(row: str, indent: int) -> str:
    """`acc` = the log-sum-exp of step t+1's states s, s+1 (and s+2 where l'_s allows it)."""
    lines = f"""var acc = table[{row} + s];
if (s + 1 < sp) {{
  let b1 = table[{row} + s + 1];
  if (s + 2 < sp && l != blank && l != label(s + 2, toff, blank)) {{
    acc = lse3(acc, b1, table[{row} + s + 2]);
  }} else {{
    acc = lse2(acc, b1);
  }}
}}
"""
    return "".join(" " * indent + line for line in lines.splitlines(True))


@lru_cache(maxsize=32)
def ctc_table_kernel(lp_type: str, wg: int, beta: bool, serial: bool) -> KernelSource:
    """alpha (beta=False) or beta at every step into `table`. serial: one invocation per item
    walks its states (CPU adapters); else one workgroup per item, its invocations over the
    states, a storage barrier between steps (each step reads the row the previous one wrote)."""
    if serial:
        item = f"let n = i32(((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * {wg}u + lid.x);"
        leave = "if (n >= info[0]) { return; }"
        s_loop = "for (var s = 0; s < sp; s++)"
        barrier = ""
    else:
        item = "let n = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);"
        leave = "if (n >= info[0]) { return; }  // uniform: the whole workgroup leaves"
        s_loop = f"for (var s = i32(lid.x); s < sp; s += {wg})"
        barrier = "storageBarrier();"
    if beta:
        t_of = "tn - 1 - k"
        first = "s >= sp - 2"
        other = "((t + 1) * info[0] + n) * sp_max"
        recur = _from_next("other", 10)
    else:
        t_of = "k"
        first = "s < 2"
        other = "((t - 1) * info[0] + n) * sp_max"
        recur = _from_prev("other", 10).replace("alpha[", "table[")
    body = f"""
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  {item}
  {leave}
{_ITEM}  for (var k = info[2]; k < info[3]; k++) {{
    if (k < tn) {{
      let t = {t_of};
      let row = (t * info[0] + n) * sp_max;
      let other = {other};
      {s_loop} {{
        let l = label(s, toff, blank);
        let e = lp_at(t, n, l);
        var a = -p_inf();
        if (k == 0) {{
          if ({first}) {{ a = e; }}
        }} else {{
{recur}          a = acc + e;
        }}
        table[row + s] = a;
      }}
    }}
    {barrier}
  }}
}}
"""
    text = _helpers(lp_type) + body
    bufs = (("lp", lp_type, "r"), ("tg", "i32", "r"), ("items", "i32", "r"), ("table", "f32", "w"))
    return KernelSource(header(bufs) + helpers_for(text, "p_inf()") + text, "rrrw")
