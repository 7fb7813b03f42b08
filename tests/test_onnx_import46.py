"""pyrite.onnx.load_model: ONNX graphs run with pyrite ops. (1) pyrite models exported with
pyrite.onnx.export and imported back give the original's outputs and gradients; (2) single-op
graphs built with onnx.helper match onnx.reference.ReferenceEvaluator (the oracle) on random
inputs of awkward shapes; (3) models exported by torch.onnx.export match torch; (4) refusals
name the op, the node and the opset at load time, and bad inputs at forward time."""

import io

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from pyrite.onnx import OnnxModule, load_model  # noqa: E402
from pyrite.onnx.errors import UnsupportedOperatorError  # noqa: E402
from tests.test_onnx_export36 import _seed as _rng  # noqa: E402

EPS = float(np.finfo(np.float32).eps)


def _close(got, want, tol, seed, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    tol = np.broadcast_to(tol, want.shape)
    bad = ~(np.abs(got - want) <= tol) & ~(np.isnan(got) & np.isnan(want))
    assert not bad.any(), (
        f"{what} seed {seed}: max err {np.abs(got - want)[bad].max()} "
        f"(tol there {tol[bad].min()}), {bad.sum()} of {bad.size} elements"
    )


# ---------------------------------------------------------------------------------------------
# (1) round trips through pyrite.onnx.export


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 5))

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.c2 = nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x):  # (N, 3, 8, 8)
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)  # (N, 6, 4, 4)
        x = F.avg_pool2d(F.leaky_relu(self.c2(x), 0.1), 1)  # (N, 8, 2, 2)
        return self.fc(x.flatten(1))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 5, 1)
        self.fc = nn.Linear(5, 3)

    def forward(self, x):  # (T, B, 4)
        y, _ = self.rnn(x)
        return self.fc(y)


def _cnn():
    m = CNN()
    with pr.no_grad():  # (non-trivial running statistics)
        m.bn.running_mean.copy_(pr.randn(6) * 0.1)
        m.bn.running_var.copy_(pr.rand(6) + 0.5)
    return m


_ROUND_TRIPS = {
    "mlp": (MLP, (3, 6), 64),
    "cnn": (_cnn, (2, 3, 8, 8), 256),
    "transformer": (
        lambda: nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True),
        (2, 5, 8),
        512,
    ),  # fmt: skip
    "lstm": (LSTMNet, (4, 2, 4), 128),
}


@pytest.mark.parametrize("name", list(_ROUND_TRIPS))
def test_round_trip_outputs_and_gradients(request, name):
    """Outputs within `depth` float32 roundings of the original's; gradients of a random
    projection of the output w.r.t. the input and every parameter likewise."""
    rng, seed = _rng(request)
    make, shape, depth = _ROUND_TRIPS[name]
    m = make().eval()
    x = rng.standard_normal(shape).astype(np.float32)
    buf = io.BytesIO()
    pr.onnx.export(m, (pr.tensor(x),), buf)
    im = load_model(buf.getvalue())
    assert isinstance(im, OnnxModule)
    proj = pr.tensor(rng.standard_normal(m(pr.tensor(x)).shape).astype(np.float32))

    def run(model):
        xt = pr.tensor(x, requires_grad=True)
        y = model(xt)
        (y * proj).sum().backward()
        return y.detach().numpy(), xt.grad.numpy()

    y0, gx0 = run(m)
    y1, gx1 = run(im)
    _close(y1, y0, depth * EPS * (np.abs(y0) + 1), seed, "output")
    _close(gx1, gx0, depth * EPS * (np.abs(gx0) + np.abs(gx0).max()), seed, "input grad")
    params = dict(m.named_parameters())
    checked = 0
    for key, p in im.named_parameters():
        onnx_name = im.onnx_names[key]
        if onnx_name in params and params[onnx_name].grad is not None:
            g0 = params[onnx_name].grad.numpy()
            _close(p.grad.numpy(), g0, depth * EPS * (np.abs(g0) + np.abs(g0).max()), seed, key)
            checked += 1
    assert checked >= 2
    # the state_dict holds every initializer, by sanitized name
    sd = im.state_dict()
    assert all("." not in k for k in sd) and len(sd) >= checked


def test_fine_tune_steps_reduce_loss(request):
    rng, seed = _rng(request)
    m = MLP()
    buf = io.BytesIO()
    pr.onnx.export(m, (pr.randn(8, 6),), buf)
    im = load_model(buf.getvalue())
    assert all(p.requires_grad for p in im.parameters())
    opt = pr.optim.SGD(im.parameters(), lr=0.1)
    x = pr.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    t = pr.tensor(rng.integers(0, 5, 8))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.nll_loss(im(x), t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


# ---------------------------------------------------------------------------------------------
# (2) one node against onnx's reference evaluator


class Init:
    """An argument given as an initializer (constant), not a graph input."""

    def __init__(self, v):
        self.v = np.asarray(v)


def _f(*shape, lo=-2.0, hi=2.0):
    return ("f", shape, lo, hi)


def _arr(spec, rng):
    if isinstance(spec, tuple) and spec and spec[0] == "f":
        _, shape, lo, hi = spec
        return rng.uniform(lo, hi, shape).astype(np.float32)
    return np.asarray(spec)


def _model(op, args, attrs, opset, n_out):
    inputs, inits, names, feeds = [], [], [], {}
    for i, a in enumerate(args):
        if a is None:
            names.append("")
            continue
        nm = f"x{i}"
        names.append(nm)
        if isinstance(a, Init):
            inits.append(numpy_helper.from_array(a.v, nm))
        else:
            elem = helper.np_dtype_to_tensor_dtype(a.dtype)
            inputs.append(helper.make_tensor_value_info(nm, elem, a.shape))
            feeds[nm] = a
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"the_{op}", **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info(o)
                                                     for o in outs], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model, feeds


# tolerances: "exact" (data movement, integer results); ("ew", n): n ulps of |ref| plus n ulps
# of the output's scale (transcendental WGSL built-ins are accurate to an absolute few ulps);
# ("dot", k): k * eps * (|A| |B|) for products of length-k sums, from the case's `bound`.
_CASES = []


def case(op, args, attrs=None, opset=17, n_out=1, tol=("ew", 8), id=None, bound=None, oracle=None):
    """`oracle`: a numpy function of the inputs, where onnx.reference gets the op wrong."""
    _CASES.append(pytest.param(op, args, attrs or {}, opset, n_out, tol, (bound, oracle),
                               id=id or f"{op}-{len(_CASES)}"))  # fmt: skip


def _softmax_2d(x, axis=1, log=False):
    """Softmax before opset 13 (onnx.reference ignores this): x flattened to 2-D at `axis`."""
    x2 = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(x2 - x2.max(1, keepdims=True))
    y = e / e.sum(1, keepdims=True)
    return [(np.log(y) if log else y).reshape(x.shape)]


def _lrn(x, size=3, alpha=0.01, beta=0.75, bias=1.0):
    """LRN as the spec says (onnx.reference's loops over the batch dim instead of channels)."""
    sq = np.zeros(x.shape, np.float64)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + -(-(size - 1) // 2) + 1)
        sq[:, i] = (x[:, lo:hi].astype(np.float64) ** 2).sum(1)
    return [x / (bias + alpha / size * sq) ** beta]


A = _f(3, 5, 7)
for _op in ("Relu", "Sigmoid", "Tanh", "Softplus", "Erf", "Abs", "Neg", "Exp", "Floor", "Ceil",
            "HardSwish", "Softsign", "Sign", "Sin", "Cos", "Atan"):  # fmt: skip
    case(_op, [A], tol=("ew", 16))
case("Sqrt", [_f(2, 9, lo=0.1, hi=3)])
case("Log", [_f(2, 9, lo=0.1, hi=3)])
case("Reciprocal", [_f(2, 9, lo=0.5, hi=3)])
case("LeakyRelu", [A], {"alpha": 0.03})
case("Elu", [A], {"alpha": 0.7}, tol=("ew", 16))
case("Selu", [A], tol=("ew", 16))
case("Celu", [A], {"alpha": 1.3}, tol=("ew", 16))
case("HardSigmoid", [A], {"alpha": 0.3, "beta": 0.4})
case("ThresholdedRelu", [A], {"alpha": 0.5})
case("Shrink", [A], {"lambd": 0.6, "bias": 0.2})
case("Gelu", [A], opset=20, tol=("ew", 16))
case("Gelu", [A], {"approximate": "tanh"}, opset=20, tol=("ew", 16), id="Gelu-tanh")
case("PRelu", [A, _f(5, 1)])
case("Clip", [A, Init(np.float32(-0.5)), Init(np.float32(0.7))], tol="exact")
case("Clip", [A, None, Init(np.float32(0.7))], tol="exact", id="Clip-max-only")
case("Clip", [A], {"min": -0.3, "max": 0.2}, opset=6, tol="exact", id="Clip-attrs-opset6")
for _op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
    case(_op, [_f(3, 1, 7), _f(5, 1, lo=0.5, hi=2)], tol=("ew", 2))
case("Pow", [_f(4, 3, lo=0.5, hi=2), _f(3, lo=-2, hi=2)], tol=("ew", 32))
case("Pow", [_f(4, 3), Init(np.float32(2.0))], tol=("ew", 4), id="Pow-square")
case("Div", [np.array([7, -7, 9, -9, 0], np.int64), np.array([2, 2, -4, -4, 3], np.int64)],
     tol="exact", id="Div-int-trunc")  # fmt: skip
case("Mod", [np.array([7, -7, 9, -9], np.int32), np.array([3, 3, -4, -4], np.int32)], tol="exact")
case("Mod", [_f(6), Init(np.float32([1.5] * 6))], {"fmod": 1}, tol=("ew", 4), id="Mod-fmod")
case("Sum", [_f(2, 3), _f(3), _f(1, 3)], tol=("ew", 4))
case("Mean", [_f(2, 3), _f(3), _f(1, 3)], tol=("ew", 4))
for _op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
    case(_op, [np.array([[1, 5, 3]], np.int64), np.array([[3], [1], [5]], np.int64)], tol="exact")
case("Less", [_f(4, 5), _f(5)], tol="exact", id="Less-float")
B1, B2 = np.array([True, False, True, False]), np.array([True, True, False, False])
for _op in ("And", "Or", "Xor"):
    case(_op, [B1, B2], tol="exact")
case("Not", [B1], tol="exact")
case("Where", [np.array([[True], [False], [True]]), _f(3, 4), _f(4)], tol="exact")
case("Cast", [_f(3, 4, lo=-9, hi=9)], {"to": TensorProto.INT64}, tol="exact")
case(
    "Cast", [np.array([0, 3, -2], np.int64)], {"to": TensorProto.FLOAT}, tol="exact", id="Cast-i2f"
)
case("Cast", [_f(5)], {"to": TensorProto.BOOL}, tol="exact", id="Cast-bool")
case("CastLike", [np.array([1, 2], np.int64), Init(np.zeros(1, np.float32))], tol="exact")
case("IsNaN", [np.array([1.0, np.nan, np.inf], np.float32)], tol="exact")
case("IsInf", [np.array([1.0, -np.inf, np.inf], np.float32)], {"detect_negative": 0}, tol="exact")

# products: the bound is k * eps * (|A| @ |B|) computed by the test from the inputs
case("MatMul", [_f(2, 3, 5, 7), _f(7, 4)], tol=("dot", 7), bound="matmul")
case("MatMul", [_f(7), _f(3, 7, 2)], tol=("dot", 7), bound="matmul", id="MatMul-vec")
case("Gemm", [_f(4, 5), _f(4, 3), _f(3)], {"transA": 1, "alpha": 0.5, "beta": 2.0},
     tol=("dot", 8), bound="gemm")  # fmt: skip
case("Gemm", [_f(4, 5), _f(3, 5), _f(4, 1)], {"transB": 1}, tol=("dot", 8), bound="gemm",
     id="Gemm-transB")  # fmt: skip
case("Einsum", [_f(2, 3, 4), _f(2, 4, 5)], {"equation": "bij,bjk->bik"}, tol=("dot", 6),
     bound="matmul")  # fmt: skip
for _opset in (11, 13):
    old = _opset < 13
    case("Softmax", [_f(2, 3, 5)], {"axis": 1}, opset=_opset, tol=("ew", 16),
         id=f"Softmax-{_opset}", oracle=_softmax_2d if old else None)  # fmt: skip
    case("LogSoftmax", [_f(2, 3, 5)], {"axis": 1}, opset=_opset, tol=("ew", 32),
         id=f"LogSoftmax-{_opset}",
         oracle=(lambda x: _softmax_2d(x, log=True)) if old else None)  # fmt: skip
case("Hardmax", [_f(3, 7)], tol="exact")

# reductions: sums of n terms, n ulps
R = _f(3, 4, 5)
for _op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"):  # fmt: skip
    case(_op, [R, Init(np.array([0, -1], np.int64))], {"keepdims": 0}, opset=18, tol=("ew", 64))
case("Mish", [A], opset=18, tol=("ew", 16))
case("ReduceSum", [R, Init(np.array([1], np.int64))], opset=13, tol=("ew", 16), id="RS-13")
case("ReduceSum", [R], {"axes": [1]}, opset=11, tol=("ew", 16), id="RS-attr-11")
case("ReduceMean", [R], {"axes": [2], "keepdims": 1}, opset=13, tol=("ew", 16), id="RM-attr-13")
case("ReduceSum", [R, Init(np.zeros(0, np.int64))], {"noop_with_empty_axes": 1}, opset=18,
     tol="exact", id="RS-noop")  # fmt: skip
case("ReduceMax", [R], {"keepdims": 1}, opset=18, tol="exact", id="RMax-all")
case("ArgMax", [_f(3, 5, 4)], {"axis": 1, "keepdims": 0}, tol="exact")
case("ArgMin", [np.array([[1, 0, 0, 2], [3, 3, 1, 1]], np.float32)],
     {"axis": 1, "select_last_index": 1}, tol="exact")  # fmt: skip

# shapes and data movement
X = _f(2, 3, 4)
case("Reshape", [X, Init(np.array([0, -1, 2], np.int64))], tol="exact")
case("Reshape", [X, Init(np.array([4, 0, 2], np.int64))], {"allowzero": 0}, tol="exact", id="Rs0")
case("Flatten", [X], {"axis": 2}, tol="exact")
case("Flatten", [X], {"axis": -1}, tol="exact", id="Flatten-neg")
case("Transpose", [X], {"perm": [2, 0, 1]}, tol="exact")
case("Transpose", [X], tol="exact", id="Transpose-default")
case("Concat", [X, _f(2, 1, 4), _f(2, 2, 4)], {"axis": -2}, tol="exact")
case("Split", [_f(7, 3), Init(np.array([2, 5], np.int64))], n_out=2, opset=13, tol="exact")
case("Split", [_f(7, 3)], {"num_outputs": 3}, n_out=3, opset=18, tol="exact", id="Split-num")
case("Split", [_f(6, 3)], {"split": [1, 5]}, n_out=2, opset=11, tol="exact", id="Split-attr")
case("Split", [_f(3, 6)], {"axis": 1}, n_out=3, opset=13, tol="exact", id="Split-equal")
S = _f(5, 7, 6)
_sl = {"st": [1, -1, 0], "en": [4, -8, 2**62], "ax": [0, 1, 2], "sp": [2, -2, 1]}
case("Slice", [S] + [Init(np.array(_sl[k], np.int64)) for k in ("st", "en", "ax", "sp")],
     tol="exact")  # fmt: skip
case("Slice", [S, Init(np.array([-3], np.int64)), Init(np.array([2**63 - 1], np.int64)),
               Init(np.array([-1], np.int64))], tol="exact", id="Slice-int64max")  # fmt: skip
case("Gather", [_f(5, 4), Init(np.array([[0, -1], [3, 2]], np.int64))], {"axis": 0}, tol="exact")
case("Gather", [_f(3, 5), Init(np.array(-2, np.int64))], {"axis": 1}, tol="exact", id="Gather-0d")
case("GatherElements", [_f(3, 4), Init(np.array([[0, 3], [1, -1], [2, 2]], np.int64))],
     {"axis": 1}, tol="exact")  # fmt: skip
case("GatherND", [_f(2, 3, 4), Init(np.array([[0, 1], [1, 2], [1, -1]], np.int64))], tol="exact")
case("GatherND", [_f(2, 3, 4), Init(np.array([[1], [2]], np.int64))], {"batch_dims": 1},
     tol="exact", id="GatherND-batch")  # fmt: skip
_si = Init(np.array([[1, 0, 2], [0, 2, 1]], np.int64))
case("ScatterElements", [_f(3, 3), _si, _f(2, 3)], {"axis": 0}, tol="exact")
case("ScatterElements", [_f(3, 3), _si, _f(2, 3)], {"axis": 1, "reduction": "add"}, opset=18,
     tol=("ew", 2), id="ScatterElements-add")  # fmt: skip
case("ScatterND", [_f(4, 3), Init(np.array([[2], [0]], np.int64)), _f(2, 3)], tol="exact")
case("ScatterND", [_f(4, 3), Init(np.array([[1, 2], [3, 0]], np.int64)), _f(2)],
     {"reduction": "mul"}, opset=18, tol=("ew", 2), id="ScatterND-mul")  # fmt: skip
case("Expand", [_f(3, 1), Init(np.array([2, 1, 4], np.int64))], tol="exact")
case("Tile", [_f(2, 3), Init(np.array([2, 3], np.int64))], tol="exact")
case("Squeeze", [_f(1, 3, 1, 2), Init(np.array([0, -2], np.int64))], tol="exact")
case("Squeeze", [_f(1, 3, 1, 2)], {"axes": [2]}, opset=11, tol="exact", id="Squeeze-attr")
case("Unsqueeze", [_f(3, 2), Init(np.array([0, -1], np.int64))], tol="exact")
case("Unsqueeze", [_f(3, 2)], {"axes": [1]}, opset=11, tol="exact", id="Unsqueeze-attr")
case("Shape", [X], {"start": 1, "end": -1}, opset=15, tol="exact")
case("Size", [X], tol="exact")
case("ConstantOfShape", [Init(np.array([2, 3], np.int64))],
     {"value": helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])}, tol="exact")  # fmt: skip
case("Range", [Init(np.int64(2)), Init(np.int64(11)), Init(np.int64(3))], tol="exact")
case("Identity", [X], tol="exact")
case("Dropout", [X], n_out=1, tol="exact")
case("TopK", [_f(3, 7), Init(np.array([3], np.int64))], {"axis": 1}, n_out=2, tol="exact")
case("TopK", [_f(6, 2), Init(np.array([2], np.int64))], {"axis": 0, "largest": 0}, n_out=2,
     tol="exact", id="TopK-smallest")  # fmt: skip
case("CumSum", [_f(3, 5), Init(np.array(1, np.int64))], tol=("ew", 8))
case("CumSum", [_f(3, 5), Init(np.array(0, np.int64))], {"exclusive": 1, "reverse": 1},
     tol=("ew", 8), id="CumSum-excl-rev")  # fmt: skip
case("Trilu", [_f(2, 4, 5), Init(np.array(1, np.int64))], tol="exact")
case("Trilu", [_f(4, 5)], {"upper": 0}, tol="exact", id="Trilu-lower")
case("NonZero", [np.array([[1, 0, 2], [0, 0, 3]], np.float32)], tol="exact")
case("OneHot", [np.array([0, 2, -1], np.int64), Init(np.int64(4)),
                Init(np.array([0.0, 3.0], np.float32))], tol="exact")  # fmt: skip
case("DepthToSpace", [_f(1, 8, 2, 3)], {"blocksize": 2}, tol="exact")
case("DepthToSpace", [_f(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, tol="exact", id="D2S-CRD")
case("SpaceToDepth", [_f(1, 2, 4, 6)], {"blocksize": 2}, tol="exact")

# neural-network ops: a conv output sums C_in * prod(k) products, bounded per output element by
# that many ulps of the sum of their magnitudes, which the inputs' range (|x| <= 2) caps
case("Conv", [_f(2, 3, 7, 6), _f(4, 3, 3, 2), _f(4)], {"pads": [1, 0, 2, 1], "strides": [2, 1]},
     tol=("ew", 18), id="Conv2d-asym")  # fmt: skip
case("Conv", [_f(1, 4, 9), _f(6, 2, 3)], {"group": 2, "dilations": [2], "auto_pad": "SAME_UPPER"},
     tol=("ew", 6), id="Conv1d-groups")  # fmt: skip
case("Conv", [_f(1, 2, 4, 5, 3), _f(2, 2, 2, 2, 2)], {"pads": [1, 1, 0, 1, 1, 0]},
     tol=("ew", 16), id="Conv3d")  # fmt: skip
case("Conv", [_f(1, 3, 5, 5), _f(2, 3, 3, 3)], {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
     tol=("ew", 27), id="Conv-same-lower")  # fmt: skip
case(
    "ConvTranspose",
    [_f(1, 3, 4, 5), _f(3, 2, 3, 3), _f(2)],
    {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]},
    tol=("ew", 27),
)
case("ConvTranspose", [_f(2, 4, 5), _f(4, 1, 3)], {"dilations": [2], "pads": [2, 1]},
     tol=("ew", 8), id="ConvT1d-dilated")  # fmt: skip
P = _f(2, 3, 7, 8)
case("MaxPool", [P], {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},
     tol="exact")  # fmt: skip
case("MaxPool", [P], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, tol="exact",
     id="MaxPool-ceil")  # fmt: skip
case("MaxPool", [_f(1, 2, 9)], {"kernel_shape": [2], "dilations": [2], "auto_pad": "SAME_UPPER"},
     tol="exact", id="MaxPool1d")  # fmt: skip
case("AveragePool", [P], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     tol=("ew", 8))  # fmt: skip
case("AveragePool", [P], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
     tol=("ew", 8), id="AvgPool-incl")  # fmt: skip
case("AveragePool", [P], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]},
     tol=("ew", 8), id="AvgPool-asym")  # fmt: skip
case("AveragePool", [_f(1, 2, 5, 5, 4)], {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]},
     tol=("ew", 8), id="AvgPool3d")  # fmt: skip
case("GlobalAveragePool", [P], tol=("ew", 64))
case("GlobalMaxPool", [P], tol="exact")
case("LpPool", [P], {"kernel_shape": [2, 2], "p": 2}, opset=18, tol=("ew", 16))
case("BatchNormalization", [_f(2, 3, 4, 5), _f(3), _f(3), _f(3), _f(3, lo=0.5, hi=2)],
     {"epsilon": 1e-3}, opset=15, tol=("ew", 16))  # fmt: skip
case("LayerNormalization", [_f(3, 4, 6), _f(4, 6), _f(4, 6)], {"axis": -2}, tol=("ew", 64))
case("LayerNormalization", [_f(3, 5), _f(5)], {"epsilon": 1e-3}, n_out=3, tol=("ew", 64),
     id="LN-stats")  # fmt: skip
case("InstanceNormalization", [_f(2, 3, 5, 4), _f(3), _f(3)], tol=("ew", 64))
case("GroupNormalization", [_f(2, 6, 5), _f(6), _f(6)], {"num_groups": 3}, opset=21,
     tol=("ew", 64))  # fmt: skip
case("GroupNormalization", [_f(2, 6, 5), _f(3), _f(3)], {"num_groups": 3}, opset=18,
     tol=("ew", 64), id="GN-18")  # fmt: skip
case("LRN", [_f(2, 5, 3, 3)], {"size": 3, "alpha": 0.01}, tol=("ew", 32), oracle=_lrn)
for _mode in ("constant", "reflect", "edge", "wrap"):
    case("Pad", [_f(2, 4, 5), Init(np.array([0, 1, 2, 1, 0, 3], np.int64)),
                 Init(np.float32(0.5))], {"mode": _mode}, opset=19, tol="exact",
         id=f"Pad-{_mode}")  # fmt: skip
case("Pad", [_f(3, 4), Init(np.array([2, 1], np.int64)), None, Init(np.array([1], np.int64))],
     opset=18, tol="exact", id="Pad-axes")  # fmt: skip
case("Pad", [_f(3, 4)], {"pads": [1, 0, 0, 2], "value": 2.0}, opset=2, tol="exact", id="Pad-v2")
Z = _f(1, 2, 4, 5)
_RES = [
    ("nearest", "asymmetric", "floor", [1, 1, 2, 1.5]),
    ("nearest", "half_pixel", "round_prefer_ceil", [1, 1, 1.7, 0.6]),
    ("nearest", "half_pixel", "round_prefer_floor", [1, 1, 2, 3]),
    ("nearest", "align_corners", "ceil", [1, 1, 0.5, 2]),
    ("linear", "half_pixel", None, [1, 1, 2, 1.5]),
    ("linear", "pytorch_half_pixel", None, [1, 1, 0.6, 0.25]),
    ("linear", "align_corners", None, [1, 1, 1.5, 2]),
    ("linear", "asymmetric", None, [1, 1, 2, 0.5]),
    ("cubic", "half_pixel", None, [1, 1, 2, 1.4]),
    ("cubic", "align_corners", None, [1, 1, 0.5, 2]),
]
for _m, _c, _n, _s in _RES:
    _attrs = {"mode": _m, "coordinate_transformation_mode": _c}
    if _n:
        _attrs["nearest_mode"] = _n
    case(
        "Resize",
        [Z, None, Init(np.array(_s, np.float32))],
        _attrs,
        opset=19,
        tol="exact" if _m == "nearest" else ("ew", 16),
        id=f"Resize-{_m}-{_c}-{_n}",
    )
case(
    "Resize",
    [Z, None, None, Init(np.array([1, 2, 7, 3], np.int64))],
    {"mode": "linear", "exclude_outside": 1},
    opset=13,
    tol=("ew", 16),
    id="Resize-sizes",
)
case("Resize", [Z, None, None, Init(np.array([3, 3], np.int64))],
     {"mode": "cubic", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger",
      "exclude_outside": 1}, opset=19, tol=("ew", 16), id="Resize-axes-policy")  # fmt: skip

case("Upsample", [Z, Init(np.array([1, 1, 2, 3], np.float32))], opset=9, tol="exact")

# recurrent ops (H = 3, I = 2, T = 4, B = 2)
_H, _I = 3, 2
for _op, _g in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
    for _dir in ("forward", "bidirectional"):
        _d = 2 if _dir == "bidirectional" else 1
        _extra = {"linear_before_reset": 1} if _op == "GRU" else {}
        case(_op, [_f(4, 2, _I), _f(_d, _g * _H, _I), _f(_d, _g * _H, _H), _f(_d, 2 * _g * _H),
                   None, _f(_d, 2, _H)], {"hidden_size": _H, "direction": _dir, **_extra},
             n_out=2, tol=("ew", 64), id=f"{_op}-{_dir}")  # fmt: skip
case("GRU", [_f(2, 3, _I), _f(1, 3 * _H, _I), _f(1, 3 * _H, _H)],
     {"hidden_size": _H, "layout": 1, "direction": "reverse"}, n_out=2, tol=("ew", 64),
     id="GRU-layout1-reverse-lbr0")  # fmt: skip


def _bound(kind, feeds, args, attrs):
    a, b = (np.abs(_value(x, feeds, i)).astype(np.float64) for i, x in enumerate(args[:2]))
    if kind == "matmul":
        if "equation" in attrs:
            return np.einsum(attrs["equation"], a, b)
        return np.matmul(a, b)
    a = a.T if attrs.get("transA") else a
    b = b.T if attrs.get("transB") else b
    c = np.abs(_value(args[2], feeds, 2)) if len(args) > 2 else 0.0
    return abs(attrs.get("alpha", 1.0)) * (a @ b) + abs(attrs.get("beta", 1.0)) * c


def _value(a, feeds, i):
    return a.v if isinstance(a, Init) else feeds[f"x{i}"]


@pytest.mark.parametrize("op, args, attrs, opset, n_out, tol, extra", _CASES)
def test_op_matches_reference(request, op, args, attrs, opset, n_out, tol, extra):
    rng, seed = _rng(request)
    bound, oracle = extra
    args = [a if a is None or isinstance(a, Init) else _arr(a, rng) for a in args]
    model, feeds = _model(op, args, attrs, opset, n_out)
    if oracle is not None:
        want = oracle(*feeds.values())
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    m = load_model(model.SerializeToString())
    got = m(*(pr.tensor(v) for v in feeds.values()))
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == n_out
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = g.numpy(), np.asarray(w)
        if tol == "exact" or w.dtype.kind in "biu":
            assert g.shape == w.shape, f"output {k}: shape {g.shape} != {w.shape}"
            np.testing.assert_array_equal(g.astype(w.dtype), w, err_msg=f"output {k}, seed {seed}")
        elif tol[0] == "dot":
            t = tol[1] * EPS * (_bound(bound, feeds, args, attrs) + np.finfo(np.float32).tiny)
            _close(g, w, t, seed, f"output {k}")
        else:
            scale = np.abs(w).max() if w.size else 0.0
            _close(g, w, tol[1] * EPS * (np.abs(w) + scale), seed, f"output {k}")


def _single(op, inputs, attrs, opset=17, inits=()):
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names + [nm for nm, _ in inits], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, 1, v.shape) for n, v in zip(names, inputs)],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, nm) for nm, v in inits],
    )  # fmt: skip
    m = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    return m(*(pr.tensor(v) for v in inputs)).numpy()


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_negative_crops(request, mode):
    # (onnx.reference's Pad, numpy.pad, refuses negative pads: the oracle here is numpy)
    rng, seed = _rng(request)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    got = _single("Pad", [x], {"mode": mode}, 19, [("p", np.array([-1, 2, 1, -2], np.int64))])
    kind = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode]
    want = np.pad(x[1:, :-2], [(0, 1), (2, 0)], mode=kind)
    np.testing.assert_array_equal(got, want)


def test_conv_transpose_groups_and_output_shape_against_torch(request):
    # (onnx.reference's ConvTranspose handles neither group > 1 nor output_shape)
    torch = pytest.importorskip("torch")
    rng, seed = _rng(request)
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    got = _single("ConvTranspose", [x, w], {"group": 2, "strides": [2], "pads": [1, 0]})
    want = torch.nn.functional.conv_transpose1d(torch.tensor(x), torch.tensor(w), stride=2,
                                                groups=2).numpy()[:, :, 1:]  # fmt: skip
    _close(got, want, 8 * EPS * (np.abs(want) + np.abs(want).max()), seed, "groups")
    # output_shape (7, 6) from (3, 3), stride 2, kernel 3: the full output is 7 x 7; total
    # padding (0, 1), the larger half first (ONNX, auto_pad NOTSET)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    got = _single("ConvTranspose", [x, w], {"strides": [2, 2], "output_shape": [7, 6]})
    full = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2)
    want = full.numpy()[:, :, :, 1:]
    _close(got, want, 18 * EPS * (np.abs(want) + np.abs(want).max()), seed, "output_shape")


def test_shape_subgraph_gives_host_ints(request):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (exporters' flatten), with a dynamic
    batch: the reshape target is computed on the host each call."""
    rng, seed = _rng(request)
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["y", "nf"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [i64("zero", 0), i64("ax0", [0]), i64("minus1", [-1])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m = load_model(model)
    for n in (2, 5):
        x = rng.standard_normal((n, 3, 4)).astype(np.float32)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
        _close(m(pr.tensor(x)).numpy(), want, 2 * EPS * np.abs(want), seed)
        assert m(x=pr.tensor(x)).shape == (n, 12)  # (by ONNX input name)


def test_constant_nodes_fold_once():
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Mul", ["c", "c"], ["c2"]),
        helper.make_node("Add", ["x", "c2"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [3])],
                              [helper.make_tensor_value_info("y", 1, [3])])  # fmt: skip
    m = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.op for n, _ in m._nodes] == ["Add"]  # (Constant and Mul ran at load time)
    np.testing.assert_array_equal(m(pr.zeros(3)).numpy(), [1.0, 4.0, 9.0])


def test_several_outputs_and_sources(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Neg", ["b"], ["n"])], "g",
        [helper.make_tensor_value_info(k, 1, [2]) for k in ("a", "b")],
        [helper.make_tensor_value_info(k, 1, [2]) for k in ("r", "n")],
    )  # fmt: skip
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    for src in (proto, proto.SerializeToString(), str(path), path):
        m = load_model(src)
        r, n = m(pr.tensor([-1.0, 2.0]), b=pr.tensor([3.0, -4.0]))
        assert r.numpy().tolist() == [0.0, 2.0] and n.numpy().tolist() == [-3.0, 4.0]


# ---------------------------------------------------------------------------------------------
# (3) models exported by torch.onnx.export


def _torch_export(model, x, dynamic):
    # (dynamo=True needs the onnxscript package, missing here: the TorchScript exporter it is)
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    dims = {"x": {0: "batch", 1: "length"}} if dynamic else None
    try:
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes=dims)  # fmt: skip
    except ImportError as e:  # (an exporter dependency missing from this environment)
        pytest.skip(f"torch.onnx.export(dynamo=False) failed here: {type(e).__name__}: {e}")
    return buf.getvalue()


def _torch_models():
    torch = pytest.importorskip("torch")
    tnn = torch.nn

    class TorchCNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.f = tnn.Sequential(
                tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4), tnn.ReLU(),
                tnn.MaxPool2d(2, ceil_mode=True), tnn.Conv2d(4, 6, 3, stride=2, groups=2),
                tnn.Hardswish(), tnn.AdaptiveAvgPool2d(1), tnn.Flatten(), tnn.Linear(6, 3),
            )  # fmt: skip

        def forward(self, x):
            y = self.f(x)
            return torch.softmax(y.reshape(x.shape[0], -1), -1)

    class TorchMixer(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln = tnn.LayerNorm(6)
            self.fc = tnn.Linear(6, 6)
            self.up = tnn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

        def forward(self, x):  # (N, 2, 3, 6)
            y = torch.nn.functional.gelu(self.fc(self.ln(x))) + x
            y = self.up(y)[:, :, 1:, ::2]
            return y.permute(0, 2, 1, 3).flatten(2).cumsum(1)

    class TorchGRU(tnn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = tnn.GRU(4, 5, batch_first=True, bidirectional=True)

        def forward(self, x):
            return self.rnn(x)[0].tanh()

    class TorchAttention(tnn.Module):
        """Causal attention written out: exported with a dynamic batch and length, so its
        reshapes are Shape -> Gather -> Concat subgraphs."""

        def __init__(self):
            super().__init__()
            self.qkv = tnn.Linear(8, 24)
            self.ln = tnn.LayerNorm(8)

        def forward(self, x):  # (B, T, 8)
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln(x)).reshape(b, t, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            a = (q @ k.transpose(-1, -2) / 2.0).masked_fill(mask, float("-inf")).softmax(-1)
            y = (a @ v).transpose(1, 2).reshape(b, t, c)  # (B, T, 8)
            return (
                x
                + torch.nn.functional.gelu(y, approximate="tanh")
                + y.topk(2, -1).values.sum(-1, keepdim=True)
            )

    return {
        "attention": (TorchAttention, (3, 5, 8)),
        "lstm": (lambda: tnn.LSTM(4, 6, 2, bidirectional=True), (5, 2, 4)),
        "cnn": (TorchCNN, (2, 3, 9, 9)),
        "mixer": (TorchMixer, (2, 2, 3, 6)),
        "gru": (TorchGRU, (2, 5, 4)),
    }


@pytest.mark.parametrize("name", ["attention", "lstm", "cnn", "mixer", "gru"])
def test_torch_exported_models(request, name):
    torch = pytest.importorskip("torch")
    rng, seed = _rng(request)
    torch.manual_seed(seed)
    make, shape = _torch_models()[name]
    model = make().eval()
    for mod in model.modules():  # (non-trivial running statistics)
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
    x = rng.standard_normal(shape).astype(np.float32)
    data = _torch_export(model, torch.from_numpy(x), dynamic=name == "attention")
    if name == "attention":  # (other sizes than the export's, through the dynamic axes)
        x = rng.standard_normal((2, 7, 8)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x))
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    got = load_model(data)(pr.tensor(x))
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    _close(got, want, 256 * EPS * (np.abs(want) + np.abs(want).max()), seed, name)


# ---------------------------------------------------------------------------------------------
# (4) refusals


def _one_node_model(op, domain="", opset=17, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="bad_node", domain=domain, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                              [helper.make_tensor_value_info("y", 1, None)])  # fmt: skip
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


def test_unknown_op_refused_at_load():
    with pytest.raises(UnsupportedOperatorError, match=r"'Frobnicate'.*'bad_node'.*opset 17"):
        load_model(_one_node_model("Frobnicate"))
    with pytest.raises(UnsupportedOperatorError, match=r"com\.microsoft::FusedGemm.*'bad_node'"):
        load_model(_one_node_model("FusedGemm", domain="com.microsoft"))


def test_unmappable_attributes_refused_at_load():
    with pytest.raises(UnsupportedOperatorError, match=r"'Resize'.*'bad_node'.*antialias"):
        load_model(_one_node_model("Resize", antialias=1, mode="linear"))
    with pytest.raises(UnsupportedOperatorError, match=r"'LSTM'.*activations"):
        load_model(_one_node_model("LSTM", activations=["Relu", "Tanh", "Tanh"], hidden_size=2))


def test_forward_input_errors():
    m = load_model(_one_node_model("Relu"))
    with pytest.raises(TypeError, match=r"1 input\(s\) \['x'\]"):
        m(pr.zeros(2, 3), pr.zeros(2, 3))
    with pytest.raises(TypeError, match=r"missing \['x'\]"):
        m()
    with pytest.raises(TypeError, match=r"no graph input named 'z'"):
        m(z=pr.zeros(2, 3))
    with pytest.raises(pr.ShapeError, match=r"'x' has shape \(3, 2\).*\(2, 3\)"):
        m(pr.zeros(3, 2))
    with pytest.raises(TypeError, match=r"'x' is pyrite.int32"):
        m(pr.zeros(2, 3, dtype=pr.int32))


def test_int64_out_of_range_refused():
    node = helper.make_node("Add", ["x", "big"], ["y"], name="add_big")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1])],
        [numpy_helper.from_array(np.array([2**40], np.int64), "big")],
    )  # fmt: skip
    m = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(pr.onnx.OnnxImportError, match=r"'big'.*int64.*1099511627776.*int32"):
        m(pr.tensor([1]))
