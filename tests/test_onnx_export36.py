"""pyrite.onnx.export: models written to ONNX, checked by onnx.checker and run by onnx's
reference evaluator on fresh inputs (other batch sizes where dynamic_axes says so), against
pyrite's own forward; the same model exported by torch evaluates to the same outputs."""

import io
import os
import sys
import zlib

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

EPS = float(np.finfo(np.float32).eps)


def _seed(request):
    seed = int(os.environ.get("PYRITE_SEED", zlib.crc32(request.node.name.encode())))
    pr.manual_seed(seed)
    return np.random.default_rng(seed), seed


def _run(path_or_bytes, feeds):
    model = (
        onnx.load(path_or_bytes)
        if isinstance(path_or_bytes, str)
        else onnx.load_from_string(path_or_bytes)
    )
    onnx.checker.check_model(model, full_check=True)
    return ReferenceEvaluator(model).run(None, feeds), model


def _close(got, want, depth, seed, scale=1.0):
    """float32 results of `depth` dependent roundings each: |got - want| within
    depth * eps * (|want| + scale)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    tol = depth * EPS * (np.abs(want) + scale)
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"seed {seed}: max err {np.abs(got - want).max()} (tol {tol.max()})"


def _forward(model, *xs):
    model.eval()
    with pr.no_grad():
        out = model(*(pr.tensor(x) for x in xs))
    return (out[0] if isinstance(out, tuple) else out).numpy()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 16),
                                 nn.SiLU(), nn.Linear(16, 5))  # fmt: skip

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.c2 = nn.Conv2d(6, 8, 3, stride=2, padding=1, bias=False)
        self.gn = nn.GroupNorm(2, 8)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x):  # (N, 3, 8, 8)
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)  # (N, 6, 4, 4)
        x = F.leaky_relu(self.gn(self.c2(x)), 0.1)  # (N, 8, 2, 2)
        y = F.adaptive_avg_pool2d(x, 1).flatten(1)  # (N, 8)
        x = self.fc(x.view(x.size(0), -1))
        return (
            x
            + y.mean(dim=1, keepdim=True)
            + F.avg_pool2d(F.elu(x[:, None, :, None]), (1, 1)).sum((1, 3))
        )


def _cnn():
    m = CNN()
    with pr.no_grad():  # (non-trivial running statistics)
        m.bn.running_mean.copy_(pr.randn(6) * 0.1)
        m.bn.running_var.copy_(pr.rand(6) + 0.5)
    return m


# fast_neural_style's TransformerNet (pytorch/examples), at a tiny width, built from either
# framework's nn (torch's for the parity test)
def transformer_net(nn, F):
    class ConvLayer(nn.Module):
        def __init__(self, cin, cout, k, stride):
            super().__init__()
            self.reflection_pad = nn.ReflectionPad2d(k // 2)
            self.conv2d = nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            return self.conv2d(self.reflection_pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1, self.in1 = ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)
            self.conv2, self.in2 = ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)
            self.relu = nn.ReLU()

        def forward(self, x):
            out = self.relu(self.in1(self.conv1(x)))
            return self.in2(self.conv2(out)) + x

    class UpsampleConvLayer(nn.Module):
        def __init__(self, cin, cout, k, stride, upsample=None):
            super().__init__()
            self.upsample = upsample
            self.reflection_pad = nn.ReflectionPad2d(k // 2)
            self.conv2d = nn.Conv2d(cin, cout, k, stride)

        def forward(self, x):
            if self.upsample:
                x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
            return self.conv2d(self.reflection_pad(x))

    class TransformerNet(nn.Module):
        def __init__(self, w=4):
            super().__init__()
            self.conv1, self.in1 = ConvLayer(3, w, 5, 1), nn.InstanceNorm2d(w, affine=True)
            self.conv2, self.in2 = ConvLayer(w, 2 * w, 3, 2), nn.InstanceNorm2d(2 * w, affine=True)
            self.res1 = ResidualBlock(2 * w)
            self.deconv1 = UpsampleConvLayer(2 * w, w, 3, 1, upsample=2)
            self.in4 = nn.InstanceNorm2d(w, affine=True)
            self.deconv3 = UpsampleConvLayer(w, 3, 5, 1)
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.in1(self.conv1(x)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.res1(y)
            y = self.relu(self.in4(self.deconv1(y)))
            return self.deconv3(y)

    return TransformerNet


TransformerNet = transformer_net(nn, F)


# word_language_model's RNNModel (pytorch/examples), LSTM, tiny
class RNNModel(nn.Module):
    def __init__(self, ntoken=11, ninp=6, nhid=5, nlayers=2):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=0.2)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


def _export(model, args, tmp_path, **kw):
    path = str(tmp_path / "model.onnx")
    assert pr.onnx.export(model, args, path, **kw) is None
    return path


@pytest.mark.parametrize("opset", [13, 17])
def test_mlp_dynamic_batch(request, tmp_path, opset):
    rng, seed = _seed(request)
    m = MLP()
    path = _export(m, (pr.randn(3, 6),), tmp_path, input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=opset)  # fmt: skip
    for n in (3, 7):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        (got,), model = _run(path, {"x": x})
        _close(got, _forward(m, x), 64, seed)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert model.opset_import[0].version == opset
    inits = {t.name for t in model.graph.initializer}
    assert {"net.0.weight", "net.0.bias", "net.5.weight"} <= inits


def test_dynamic_shapes_spelling(request, tmp_path):
    # torch.export's dynamic_shapes (dynamo=True scripts): by parameter name, or by position
    rng, seed = _seed(request)
    m = MLP()

    class Dim:  # (torch.export.Dim("batch")'s name)
        __name__ = "batch"

    for shapes in ({"x": {0: Dim()}}, ((Dim(), None),)):
        path = _export(m, (pr.randn(3, 6),), tmp_path, dynamic_shapes=shapes, dynamo=True)
        x = rng.standard_normal((5, 6)).astype(np.float32)
        (got,), model = _run(path, {"x": x})
        _close(got, _forward(m, x), 64, seed)
        assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


@pytest.mark.parametrize("opset", [13, 17, 20])
def test_cnn_batchnorm_pooling(request, tmp_path, opset):
    rng, seed = _seed(request)
    m = _cnn()
    m.train()  # (export traces in eval mode and restores the mode)
    path = _export(m, pr.randn(2, 3, 8, 8), tmp_path, dynamic_axes={"x": [0], "output": [0]},
                   opset_version=opset)  # fmt: skip
    assert m.training and m.bn.training
    m.eval()
    for n in (2, 5):
        x = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
        (got,), model = _run(path, {"x": x})
        _close(got, _forward(m, x), 256, seed)
    inits = {t.name for t in model.graph.initializer}
    assert {"bn.running_mean", "bn.running_var", "c1.weight", "gn.weight"} <= inits
    kinds = {n.op_type for n in model.graph.node}
    assert {"Conv", "MaxPool", "GlobalAveragePool", "Gemm"} <= kinds
    assert ("BatchNormalization" in kinds) == (opset >= 14)  # (written out below 14)


@pytest.mark.parametrize("opset", [14, 17])
def test_transformer_encoder_layer(request, tmp_path, opset):
    rng, seed = _seed(request)
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation="gelu", batch_first=True)
    path = _export(m, (pr.randn(2, 5, 8),), tmp_path, input_names=["src"], opset_version=opset,
                   dynamic_axes={"src": {0: "batch"}, "output": {0: "batch"}})  # fmt: skip
    for n in (2, 3):
        x = rng.standard_normal((n, 5, 8)).astype(np.float32)
        (got,), model = _run(path, {"src": x})
        _close(got, _forward(m.eval(), x), 512, seed)
    kinds = {n.op_type for n in model.graph.node}
    assert ("LayerNormalization" in kinds) == (opset >= 17)


class TinyViT(nn.Module):
    """A class token expanded to the batch, a position parameter, pre-norm encoder layers."""

    def __init__(self, d=8):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(pr.randn(1, 1, d))
        self.pos = nn.Parameter(pr.randn(1, 5, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 2, 16, 0.1, activation="gelu", batch_first=True,
                                           norm_first=True)  # fmt: skip
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, 3)

    def forward(self, x):  # (B, 3, 8, 8)
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, 4, d)
        x = pr.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        y = self.enc(x)  # (B, 5, d)
        z = y.reshape(y.shape[0] * 5, -1).view(x.shape[0], 5, 2, -1)  # (a size follows B)
        w = y.reshape(-1, 5, 2, 4).transpose(0, 1).reshape(5, y.shape[0], 2, 4)  # (one: B)
        return self.head(y[:, 0]), z.sum((1, 2)), w.mean(0)


def test_vit_class_token_dynamic_batch(request, tmp_path):
    rng, seed = _seed(request)
    m = TinyViT()
    path = _export(m, pr.randn(2, 3, 8, 8), tmp_path, dynamic_axes={"x": {0: "B"}})
    for n in (1, 4):
        x = rng.standard_normal((n, 3, 8, 8)).astype(np.float32)
        outs, model = _run(path, {"x": x})
        with pr.no_grad():
            want = m.eval()(pr.tensor(x))
        for o, w in zip(outs, want):
            _close(o, w.numpy(), 512, seed)


class TwoAxes(nn.Module):
    def forward(self, x):  # (B, T, 6): a view with two sizes that follow dynamic axes
        b, t = x.shape[0], x.shape[1]
        y = x.reshape(b * t, 6).relu().view(b, t, 2, 3)
        return y.permute(1, 0, 2, 3).reshape(t, b, 6)


def test_reshape_with_two_dynamic_sizes(request, tmp_path):
    rng, seed = _seed(request)
    m = TwoAxes()
    path = _export(m, pr.randn(2, 3, 6), tmp_path, dynamic_axes={"x": {0: "B", 1: "T"}})
    for b, t in ((2, 3), (4, 2), (3, 3)):
        x = rng.standard_normal((b, t, 6)).astype(np.float32)
        (got,), _ = _run(path, {"x": x})
        _close(got, _forward(m, x), 1, seed)


def test_fast_neural_style_transformer_net(request, tmp_path):
    rng, seed = _seed(request)
    m = TransformerNet()
    path = _export(m, pr.randn(1, 3, 8, 8), tmp_path, input_names=["input_image"],
                   output_names=["output_image"], dynamic_axes={"input_image": [0]})  # fmt: skip
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    (got,), model = _run(path, {"input_image": x})
    _close(got, _forward(m.eval(), x), 1024, seed)
    kinds = {n.op_type for n in model.graph.node}
    assert {"Pad", "InstanceNormalization", "Resize", "Conv"} <= kinds
    dims = model.graph.output[0].type.tensor_type.shape.dim  # (no label given: torch's names)
    assert [d.dim_param or d.dim_value for d in dims] == ["output_image_dim_0", 3, 8, 8]


def test_word_language_model_lstm(request, tmp_path):
    rng, seed = _seed(request)
    m = RNNModel()
    tokens = pr.tensor(rng.integers(0, 11, (4, 2)))
    hidden = (pr.zeros(2, 2, 5), pr.zeros(2, 2, 5))
    dyn = {"input": {0: "seq", 1: "batch"}, "hidden_0": {1: "batch"}, "hidden_1": {1: "batch"}}
    path = _export(m, (tokens, hidden), tmp_path, dynamic_axes=dyn)
    for t, n in ((4, 2), (6, 3)):
        toks = rng.integers(0, 11, (t, n)).astype(np.int64)
        h0 = rng.standard_normal((2, n, 5)).astype(np.float32)
        c0 = rng.standard_normal((2, n, 5)).astype(np.float32)
        outs, model = _run(path, {"input": toks, "hidden_0": h0, "hidden_1": c0})
        with pr.no_grad():
            want, (h, c) = m.eval()(pr.tensor(toks), (pr.tensor(h0), pr.tensor(c0)))
        _close(outs[0], want.numpy(), 256, seed)
        _close(outs[1], h.numpy(), 256, seed)
        _close(outs[2], c.numpy(), 256, seed)
    assert [i.name for i in model.graph.input] == ["input", "hidden_0", "hidden_1"]
    assert [n.op_type for n in model.graph.node].count("LSTM") == 2


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(8, 2)  # (tanh: onnx's reference RNN has no Relu)
        self.lstm = nn.LSTM(2, 3, bias=False)

    def forward(self, x):  # (N, 5, 3)
        y, h = self.gru(x)
        z, _ = self.rnn(y.transpose(0, 1))
        u, (hn, cn) = self.lstm(z[:, 0])  # (unbatched: (T, C))
        return z, h, u, cn


def test_gru_rnn_lstm_variants(request, tmp_path):
    rng, seed = _seed(request)
    m = Recurrent()
    path = _export(m, pr.randn(2, 5, 3), tmp_path, dynamic_axes={"x": [0, 1]})
    x = rng.standard_normal((3, 4, 3)).astype(np.float32)
    outs, model = _run(path, {"x": x})
    with pr.no_grad():
        want = m.eval()(pr.tensor(x))
    for o, w in zip(outs, want):
        _close(o, w.numpy(), 256, seed)
    kinds = [n.op_type for n in model.graph.node]
    assert (kinds.count("GRU"), kinds.count("RNN"), kinds.count("LSTM")) == (2, 1, 1)


class Ops(nn.Module):
    """A forward through the shape, indexing and activation ops export maps."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.ln = nn.LayerNorm(4, elementwise_affine=False)

    def forward(self, x, idx):  # x (N, 4, 6, 6), idx (3,)
        x.mul_(1.5)  # (in place, on the input)
        a, b = x.split(2, dim=1)
        y = pr.cat([b, a], 1).permute(0, 2, 3, 1)  # (N, 6, 6, 4)
        y = self.ln(y) + self.emb(idx)[1]
        y = F.softplus(y, beta=2.0) - F.hardtanh(y, -0.5, 0.5) * pr.sigmoid(y).sqrt()
        z = y.transpose(1, 3)[:, ::2, 1:5, -1].unsqueeze(-1).squeeze(-1)  # (N, 2, 4)
        z = F.pad(z, (1, 2), mode="constant")  # (N, 2, 7)
        z = z / 3.0 - 1.0 / (2.0 + z.exp())
        q = z.reshape(z.shape[0], 1, 2, 7)
        att = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        up = F.pixel_shuffle(x, 2)  # (N, 1, 12, 12)
        up = (
            up
            + F.interpolate(x[:, :1], size=(12, 12))
            + F.interpolate(x[:, 1:2], size=(12, 12), mode="bilinear")
        )
        up = up[..., :7, :7] + F.interpolate(up, size=(7, 7), mode="nearest-exact")
        w = pr.where(z > 0.1, z.clamp(max=0.8), F.relu6(z * 4.0)).masked_fill(z < -0.3, 2.0)
        g = x[..., [0, 2]]  # (a list index)
        return att.flatten(1), up[..., 0, :].tanh() ** 2, F.gelu(z, approximate="tanh"), w, g


def test_op_coverage(request, tmp_path):
    rng, seed = _seed(request)
    m = Ops()
    idx = pr.tensor([0, 3, 6])
    path = _export(m, (pr.randn(2, 4, 6, 6), idx), tmp_path,
                   dynamic_axes={"x": {0: "n"}})  # fmt: skip
    for n in (2, 3):
        x = rng.standard_normal((n, 4, 6, 6)).astype(np.float32)
        i = np.array([1, 2, 5], np.int64)
        outs, model = _run(path, {"x": x, "idx": i})
        with pr.no_grad():
            want = m(pr.tensor(x), pr.tensor(i))  # (its copy of x: the forward writes into it)
        for o, w in zip(outs, want):
            _close(o, w.numpy(), 256, seed)
    kinds = {n.op_type for n in model.graph.node}
    assert {"DepthToSpace", "Slice", "Gather", "Split", "Where", "Clip", "Pad"} <= kinds


class IntOps(nn.Module):
    """Ops on an integer input and on masks: traced as the float ops are."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 3)
        self.register_buffer("seen", pr.zeros(3, dtype=pr.long))

    def forward(self, x, idx):  # x (3, 3), idx (3,)
        self.seen += idx  # (an integer buffer written in place: not marked once export ends)
        m = x > 0
        a = m.sum(1) + x.argmax(1) * idx - idx // 2 + idx % 2
        b = m.float() * x + (idx + 1).float().unsqueeze(1)
        c = x[idx[:2]] + self.emb(idx * 3 + 1)[:2]
        d = (idx * 2 == 4) & (idx > 0) | ~m[0]
        return a, b, c, d


def test_ops_on_integer_inputs_and_masks(request, tmp_path):
    rng, seed = _seed(request)
    m = IntOps()
    path = _export(m, (pr.randn(3, 3), pr.tensor([1, 2, 1])), tmp_path)
    assert not m.seen.requires_grad and not m.seen.any()  # (the traces leave the buffer as it was)
    for _ in range(2):
        x = rng.standard_normal((3, 3)).astype(np.float32)
        idx = rng.permutation(3)
        outs, _ = _run(path, {"x": x, "idx": idx.astype(np.int64)})
        with pr.no_grad():
            want = m.eval()(pr.tensor(x), pr.tensor(idx))
        for o, w in zip(outs, want):
            if w.dtype.kind == "f":
                _close(o, w.numpy(), 16, seed)
            else:
                assert (o == w.numpy()).all(), f"seed {seed}"


class Untraced(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.fc = nn.Linear(3, 3)

    def forward(self, x, idx):
        if self.how == "no_grad":
            with pr.no_grad():
                scale = x.abs().amax()
            return self.fc(x) / scale
        if self.how == "detach":
            return self.fc(x) + x.detach().exp()
        if self.how == "noise":  # (drawn from the generator: the same in every trace)
            return self.fc(x) + 0.1 * pr.randn_like(x)
        return self.fc(x) if x[0, 0] > 0 else -self.fc(x)  # ("branch")


@pytest.mark.parametrize("how", ["no_grad", "detach"])
def test_untraced_values_from_inputs_are_refused(tmp_path, how):
    args = (pr.randn(2, 3), pr.tensor([0, 2]))
    with pytest.raises(pr.onnx.OnnxExporterError, match="ops the trace does not see"):
        pr.onnx.export(Untraced(how), args, tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("ignore:.*does not read input")
def test_random_constants_and_branches(tmp_path):
    args = (pr.randn(2, 3), pr.tensor([0, 2]))
    pr.onnx.export(Untraced("noise"), args, tmp_path / "m.onnx")  # (a constant, as torch's)
    with pytest.warns(UserWarning, match="other ops for other input values"):
        x = pr.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, -1.0]])
        pr.onnx.export(Untraced("branch"), (x, args[1]), tmp_path / "m.onnx")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_same_outputs_as_torch_export(request, tmp_path):
    torch = pytest.importorskip("torch")
    rng, seed = _seed(request)
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5), torch.nn.Tanh(),
    ).eval()  # fmt: skip
    with torch.no_grad():
        tm[1].running_mean.uniform_(-0.2, 0.2)
        tm[1].running_var.uniform_(0.5, 1.5)
    pm = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                       nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5), nn.Tanh())  # fmt: skip
    pm.load_state_dict({k: pr.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    pm.eval()
    tpath = str(tmp_path / "torch.onnx")
    try:
        torch.onnx.export(tm, (torch.randn(2, 3, 8, 8),), tpath, dynamo=False,
                          input_names=["x"], output_names=["y"])  # fmt: skip
    except Exception as e:  # (an exporter that needs a package or network here)
        pytest.skip(f"torch.onnx.export unavailable: {e}")
    ppath = _export(pm, (pr.randn(2, 3, 8, 8),), tmp_path, input_names=["x"], output_names=["y"])
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    (got_t,), _ = _run(tpath, {"x": x})
    (got_p,), _ = _run(ppath, {"x": x})
    _close(got_p, got_t, 64, seed)
    with torch.no_grad():
        _close(got_p, tm(torch.tensor(x)).numpy(), 256, seed)


class More(nn.Module):
    """The rarer activations, reductions with indices, statistics and shape ops."""

    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(4)
        self.rms = nn.RMSNorm(6)

    def forward(self, x):  # (N, 4, 6)
        a = F.hardswish(x) + F.hardsigmoid(x) * F.mish(x) - F.logsigmoid(x) + F.softsign(x)
        a = a + F.selu(x) + F.celu(x, 0.5) + self.prelu(x.unsqueeze(-1)).squeeze(-1)
        a = a + F.threshold(x, 0.2, -1.0) * F.softshrink(x) - F.hardshrink(x) + F.tanhshrink(x)
        a = self.rms(a).unflatten(1, (2, 2)).flatten(1, 2)
        a = F.glu(a, 1).repeat(1, 2, 1).flip(-1).tril(1) + pr.cumsum(x, 2)  # (N, 4, 6)
        v, i = a.max(1)
        s = a.std(2, keepdim=True) + a.var((1, 2), keepdim=True) + a.logsumexp(1, keepdim=True)
        n = F.normalize(a, dim=1) * a.norm(dim=2, keepdim=True) + a.movedim(1, 2).transpose(1, 2)
        b = pr.baddbmm(a[:, :, :4], a, a.transpose(1, 2), alpha=0.5)  # (N, 4, 4)
        s = s + pr.addcmul(a, a, a, value=0.3).mean(2, keepdim=True)
        c = pr.outer(x[0, 0], x[0, 1]).index_select(0, pr.tensor([1, 0])) // 0.3
        u = F.conv1d(x[0], self.prelu.weight.view(4, 1, 1).expand(4, 4, 1))  # (unbatched)
        c = (
            c
            + F.max_pool1d(u, 2).sum()
            + F.adaptive_avg_pool1d(u, 3).mean((0, 1), dtype=pr.float32)
        )
        return v + s.amax(1) + n.sum(1), i, a.argmax(2), b, c


@pytest.mark.parametrize("opset", [13, 18])
def test_more_ops(request, tmp_path, opset):
    rng, seed = _seed(request)
    m = More()
    path = _export(m, pr.randn(2, 4, 6), tmp_path, dynamic_axes={"x": [0]}, opset_version=opset)
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    outs, model = _run(path, {"x": x})
    with pr.no_grad():
        want = m.eval()(pr.tensor(x))
    for o, w in zip(outs, want):
        if w.dtype == pr.int32:  # (indices: int64 in the file, as torch's)
            assert o.dtype == np.int64 and (o == w.numpy()).all()
        else:
            _close(o, w.numpy(), 1024, seed)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::Warning:torch")
def test_lstm_same_outputs_as_torch_export(request, tmp_path):
    torch = pytest.importorskip("torch")
    rng, seed = _seed(request)

    class TorchRNN(torch.nn.Module):  # (word_language_model's RNNModel, in torch)
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Embedding(11, 6)
            self.rnn = torch.nn.LSTM(6, 5, 2)
            self.decoder = torch.nn.Linear(5, 11)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            return torch.nn.functional.log_softmax(self.decoder(output).view(-1, 11), 1), hidden

    tm = TorchRNN().eval()
    pm = RNNModel()
    pm.load_state_dict({k: pr.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    toks = rng.integers(0, 11, (4, 2))
    h = (np.zeros((2, 2, 5), np.float32), np.zeros((2, 2, 5), np.float32))
    names = dict(input_names=["input", "h0", "c0"], output_names=["out", "hn", "cn"])
    tpath = str(tmp_path / "torch.onnx")
    try:
        targs = (torch.tensor(toks), tuple(torch.tensor(v) for v in h))
        torch.onnx.export(tm, targs, tpath, dynamo=False, **names)
    except Exception as e:
        pytest.skip(f"torch.onnx.export unavailable: {e}")
    ppath = _export(pm, (pr.tensor(toks), tuple(pr.tensor(v) for v in h)), tmp_path, **names)
    feeds = {
        "input": rng.integers(0, 11, (4, 2)).astype(np.int64),
        "h0": rng.standard_normal((2, 2, 5)).astype(np.float32),
        "c0": rng.standard_normal((2, 2, 5)).astype(np.float32),
    }
    got_t, _ = _run(tpath, feeds)
    got_p, _ = _run(ppath, feeds)
    for a, b in zip(got_p, got_t):
        _close(a, b, 64, seed)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::Warning:torch")
def test_transformer_net_same_outputs_as_torch_export(request, tmp_path):
    torch = pytest.importorskip("torch")
    rng, seed = _seed(request)
    tm = transformer_net(torch.nn, torch.nn.functional)().eval()
    with torch.no_grad():  # (affine parameters other than their ones and zeros)
        for n, p in tm.named_parameters():
            if ".in" in n or n.startswith("in"):
                p.add_(torch.randn(p.shape) * 0.2)
    pm = TransformerNet()
    pm.load_state_dict({k: pr.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tpath = str(tmp_path / "torch.onnx")
    try:
        torch.onnx.export(tm, (torch.randn(1, 3, 8, 8),), tpath, dynamo=False,
                          input_names=["x"], output_names=["y"])  # fmt: skip
    except Exception as e:
        pytest.skip(f"torch.onnx.export unavailable: {e}")
    ppath = _export(pm, pr.randn(1, 3, 8, 8), tmp_path, input_names=["x"], output_names=["y"])
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    (got_t,), _ = _run(tpath, {"x": x})
    (got_p,), _ = _run(ppath, {"x": x})
    _close(got_p, got_t, 256, seed)


class Unsupported(nn.Module):
    def forward(self, x):
        return pr.lgamma(x) + 1


def test_unsupported_op_raises_and_leaves_no_file(tmp_path):
    path = tmp_path / "bad.onnx"
    with pytest.raises(
        RuntimeError,
        match="Exporting the operator 'lgamma' to ONNX opset version 17 is not supported",
    ):
        pr.onnx.export(Unsupported(), (pr.randn(3),), str(path))
    assert list(tmp_path.iterdir()) == []
    path.write_bytes(b"old")  # (a previous file stays as it was)
    with pytest.raises(RuntimeError, match="lgamma"):
        pr.onnx.export(Unsupported(), (pr.randn(3),), path)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]


def test_file_object_and_import_error(tmp_path, monkeypatch):
    m = nn.Linear(3, 2)
    buf = io.BytesIO()
    pr.onnx.export(m, pr.randn(4, 3), buf)
    x = np.ones((4, 3), np.float32)
    (got,), _ = _run(buf.getvalue(), {"input": x})
    _close(got, _forward(m, x), 16, 0)
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install onnx"):
        pr.onnx.export(m, pr.randn(4, 3), str(tmp_path / "m.onnx"))
    assert list(tmp_path.iterdir()) == []


def test_old_export_spelling_under_no_grad_and_params_as_inputs(request, tmp_path):
    # fast_neural_style: `output = torch.onnx._export(style_model, content_image, path)` inside
    # torch.no_grad(), then output[0]
    rng, seed = _seed(request)
    m = TransformerNet()
    x = pr.randn(1, 3, 8, 8)
    with pr.no_grad():
        out = pr.onnx._export(m, x, str(tmp_path / "a.onnx"))
        want = m.eval()(x)
    assert not out.requires_grad
    _close(out[0].numpy(), want[0].numpy(), 64, seed)
    m2 = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    c2 = pr.compile(m2)
    with pr.no_grad():
        c2(pr.randn(2, 3))  # (compiled and replayed: export traces the original module)
    buf = io.BytesIO()
    pr.onnx.export(c2, pr.randn(2, 3), buf)
    (got,), _ = _run(buf.getvalue(), {"input": np.ones((2, 3), np.float32)})
    _close(got, _forward(m2, np.ones((2, 3), np.float32)), 16, seed)
    path = str(tmp_path / "b.onnx")
    pr.onnx.export(m2, pr.randn(2, 3), path, export_params=False, input_names=["x"])
    feeds = {"x": np.ones((2, 3), np.float32)}
    feeds.update({k: v.numpy() for k, v in m2.state_dict().items()})
    (got,), model = _run(path, feeds)
    assert [i.name for i in model.graph.input] == ["x", "0.weight", "0.bias"]
    assert not model.graph.initializer
    _close(got, _forward(m2, feeds["x"]), 16, seed)
    pr.onnx.export(m2, pr.randn(2, 3), path, keep_initializers_as_inputs=True)
    model = onnx.load(path)
    assert [i.name for i in model.graph.input] == ["input", "0.weight", "0.bias"]


def test_dropout_in_training_mode_is_refused(tmp_path):
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).eval()
    path = tmp_path / "m.onnx"
    pr.onnx.export(m, pr.randn(2, 3), path, training=pr.onnx.TrainingMode.PRESERVE)
    m.train()
    with pytest.raises(pr.onnx.UnsupportedOperatorError, match=r"dropout\(training=True\)"):
        pr.onnx.export(m, pr.randn(2, 3), path, training=pr.onnx.TrainingMode.PRESERVE)
    assert m.training
    pr.onnx.export(m, pr.randn(2, 3), path)  # (TrainingMode.EVAL: the dropout is identity)
    assert m.training


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_models(request, tmp_path, dtype):
    rng, seed = _seed(request)
    dt = getattr(pr, dtype)
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2)).to(dt)
    path = _export(m, pr.randn(3, 4).to(dt), tmp_path)
    x = pr.tensor(rng.standard_normal((3, 4)).astype(np.float32)).to(dt)
    host = x.float().numpy()
    if dtype == "bfloat16":
        import ml_dtypes

        host = host.astype(ml_dtypes.bfloat16)
    else:
        host = host.astype(np.float16)
    (got,), model = _run(path, {"input": host})
    assert model.graph.initializer[0].data_type == (10 if dtype == "float16" else 16)
    with pr.no_grad():
        want = m.eval()(x).float().numpy()
    eps = 2.0**-10 if dtype == "float16" else 2.0**-7  # (the result's rounding: one ulp at 1)
    bad = np.abs(got.astype(np.float32) - want) > 8 * eps * (np.abs(want) + 1)
    assert not bad.any(), f"seed {seed}"


def test_is_in_onnx_export():
    seen = []

    class M(nn.Module):
        def forward(self, x):
            seen.append(pr.onnx.is_in_onnx_export())
            return x * 2

    pr.onnx.export(M(), pr.randn(2), io.BytesIO())
    M()(pr.randn(2))
    assert seen[-1] is False and all(seen[:-1]) and len(seen) >= 2  # (traced, then checked)
    assert issubclass(pr.onnx.errors.UnsupportedOperatorError, pr.onnx.errors.OnnxExporterError)


def test_bad_opset():
    with pytest.raises(ValueError, match="opset"):
        pr.onnx.export(nn.Linear(2, 2), pr.randn(1, 2), io.BytesIO(), opset_version=9)
