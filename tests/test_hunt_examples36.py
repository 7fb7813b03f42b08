"""The official pytorch/examples programs, ported by changing the import (session 36's hunt).

Each example's model and training code is copied as close to verbatim as the test allows, inside
a function whose parameter is named `torch`: called once with PyTorch (CPU) and once with pyrite,
from the same initial weights (torch's, copied through numpy) and the same synthetic data (random
arrays of the datasets' shapes and dtypes: nothing is downloaded), for a few optimizer steps.
What changed from the original is marked `# port:` (sizes, data, dropout set to 0 so that the two
runs draw no random masks, arguments that came from argparse).

Tolerances are float32's: losses and parameters after a few steps agree to rtol 1e-4 / atol 1e-5
unless a test says why it needs more (adaptive optimizers amplify the rounding of gradients that
are near zero; convolutions sum in another order)."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest
import torch

import pyrite as pr


# ---- helpers ------------------------------------------------------------------------------
def _modules(torch, *names):
    """The submodules a script imports (`import torch.nn as nn`, ...), of framework `torch`."""
    return [importlib.import_module(f"{torch.__name__}.{name}") for name in names]


class _Weights:
    """The init hook both runs of a program call on each model they build, in order: torch's run
    records each model's state; pyrite's run loads the same state into its model."""

    def __init__(self):
        self.states, self.taken = [], 0

    def __call__(self, model):
        if isinstance(model, torch.nn.Module):
            self.states.append(
                {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
            )
        else:
            model.load_state_dict(self.states[self.taken])
            self.taken += 1
        return model


def _np(x):
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy"):
        return np.array(x.numpy())
    return np.asarray(x)


def _compare(got, want, rtol, atol, where="result"):
    """Walk a program's result (modules, tensors, numbers, and dicts / lists / tuples of them)."""
    if isinstance(want, str):
        assert got == want, where
    elif isinstance(want, torch.nn.Module):
        gs, ws = got.state_dict(), want.state_dict()
        assert list(gs) == list(ws), where
        for k in ws:
            _compare(gs[k], ws[k], rtol, atol, f"{where}.{k}")
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            _compare(got[k], want[k], rtol, atol, f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)) and not all(isinstance(w, (int, float)) for w in want):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, rtol, atol, f"{where}[{i}]")
    else:
        np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=atol, err_msg=where)


def _parity(program, *args, rtol=1e-4, atol=1e-5):
    """Run `program(torch, init, *args)` for torch and for pyrite; their results agree."""
    init = _Weights()
    want = program(torch, init, *args)
    got = program(pr, init, *args)
    assert init.taken == len(init.states)
    _compare(got, want, rtol, atol)
    return got, want


def _picklable(torch, *classes):
    """port: an example's classes live at its module's top level, where pickle (torch.save of a
    whole model) finds them by name; here they are made in a function, so they are registered
    in this module's namespace under a name per framework."""
    for cls in classes:
        cls.__qualname__ = f"_{torch.__name__}_{cls.__name__}"
        cls.__module__ = __name__
        globals()[cls.__qualname__] = cls
    return classes


def _no_dropout(model, torch):
    """port: dropout off (p = 0), so that the two runs draw no random masks."""
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.dropout._DropoutNd):
            mod.p = 0.0
        if isinstance(mod, (torch.nn.MultiheadAttention, torch.nn.RNNBase)):
            mod.dropout = 0.0  # (a float attribute: attention's, and between RNN layers)
    return model


# ---- mnist/main.py: a CNN, Adadelta, StepLR ------------------------------------------------
def _mnist(torch, init, X, Y):
    nn, F, optim, lr_scheduler = _modules(
        torch, "nn", "nn.functional", "optim", "optim.lr_scheduler"
    )
    StepLR = lr_scheduler.StepLR

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())  # port: kept, where the example prints it

    def test(model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)
        return test_loss, correct

    torch.manual_seed(1)
    use_accel = torch.accelerator.is_available()
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    dataset1 = torch.utils.data.TensorDataset(torch.from_numpy(X[:8]), torch.from_numpy(Y[:8]))
    dataset2 = torch.utils.data.TensorDataset(torch.from_numpy(X[8:]), torch.from_numpy(Y[8:]))
    train_loader = torch.utils.data.DataLoader(dataset1, batch_size=4)
    test_loader = torch.utils.data.DataLoader(dataset2, batch_size=5)

    model = _no_dropout(init(Net().to(device)), torch)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    losses, tests = [], []
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, 3):
        train(None, model, device, train_loader, optimizer, epoch)
        tests.append(test(model, device, test_loader))
        scheduler.step()
    return {"model": model, "losses": losses, "tests": tests}


def test_mnist(rng):
    X = rng.standard_normal((13, 1, 28, 28)).astype(np.float32)
    Y = rng.integers(0, 10, 13)
    _parity(_mnist, X, Y)


# ---- mnist_rnn/main.py: an LSTM over image rows, BatchNorm1d, Dropout2d on 2-d input ------
def _mnist_rnn(torch, init, X, Y):
    nn, F, optim, lr_scheduler = _modules(
        torch, "nn", "nn.functional", "optim", "optim.lr_scheduler"
    )
    StepLR = lr_scheduler.StepLR

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(64)
            self.dropout1 = nn.Dropout2d(0.25)
            self.dropout2 = nn.Dropout2d(0.5)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, input):
            # Shape of input is (batch_size,1, 28, 28)
            # converting shape of input to (batch_size, 28, 28)
            # as required by RNN when batch_first is set True
            input = input.reshape(-1, 28, 28)
            output, hidden = self.rnn(input)

            # RNN output shape is (seq_len, batch, input_size)
            # Get last output of RNN
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = self.fc1(output)
            output = F.relu(output)
            output = self.dropout2(output)
            output = self.fc2(output)
            output = F.log_softmax(output, dim=1)
            return output

    def train(args, model, device, train_loader, optimizer, epoch):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())  # port: kept, where the example prints it

    def test(args, model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        return test_loss, correct

    device = torch.device("cpu")
    torch.manual_seed(1)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(X[:8]), torch.from_numpy(Y[:8])),
        batch_size=4,
    )
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(X[8:]), torch.from_numpy(Y[8:])),
        batch_size=5,
    )
    model = _no_dropout(init(Net().to(device)), torch)
    optimizer = optim.Adadelta(model.parameters(), lr=0.1)
    losses, tests = [], []
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, 3):
        train(None, model, device, train_loader, optimizer, epoch)
        tests.append(test(None, model, device, test_loader))
        scheduler.step()
    return {"model": model, "losses": losses, "tests": tests}


def test_mnist_rnn(rng):
    X = rng.random((13, 1, 28, 28), dtype=np.float32)
    Y = rng.integers(0, 10, 13)
    _parity(_mnist_rnn, X, Y)


# ---- mnist_forward_forward/main.py: layer-local training, Layer(nn.Linear) with its own Adam --
def _forward_forward(torch, init, x, y, y_neg):
    nn, optim = _modules(torch, "nn", "optim")
    Adam = optim.Adam
    device = torch.device("cpu")

    class args:  # port: the example's argparse values, smaller
        lr, threshold, epochs, log_interval = 0.03, 2.0, 3, 10

    def get_y_neg(y):
        y_neg = y.clone()
        for idx, y_samp in enumerate(y):
            allowed_indices = list(range(10))
            allowed_indices.remove(y_samp.item())
            y_neg[idx] = torch.tensor(allowed_indices)[
                torch.randint(len(allowed_indices), size=(1,))
            ].item()
        return y_neg.to(device)

    def overlay_y_on_x(x, y, classes=10):
        x_ = x.clone()
        x_[:, :classes] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                self.layers = self.layers + [init(Layer(dims[d], dims[d + 1]).to(device))]

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            for i, layer in enumerate(self.layers):
                h_pos, h_neg = layer.train(h_pos, h_neg)

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = torch.nn.ReLU()
            self.opt = Adam(self.parameters(), lr=args.lr)
            self.threshold = args.threshold
            self.num_epochs = args.epochs

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg):
            for i in range(self.num_epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = torch.log1p(
                    torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
                ).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                losses.append(loss.item())  # port: kept, where the example prints it
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    losses = []
    torch.manual_seed(1)
    net = Net([784, 40, 30])  # port: [784, 500, 500]
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    drawn = get_y_neg(y)  # port: the negatives drawn here are checked, the shared ones used
    assert bool((drawn != y).all()) and 0 <= int(drawn.min()) and int(drawn.max()) < 10
    x_pos = overlay_y_on_x(x, y)
    y_neg = torch.from_numpy(y_neg)
    x_neg = overlay_y_on_x(x, y_neg)
    net.train(x_pos, x_neg)
    train_error = 1.0 - net.predict(x).eq(y).float().mean().item()
    return {"layers": list(net.layers), "losses": losses, "error": train_error, "x_neg": x_neg}


def test_mnist_forward_forward(rng):
    x = rng.standard_normal((16, 784)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    y_neg = (y + rng.integers(1, 10, 16)) % 10
    # atol: Adam's steps are lr = 0.03 whatever the gradient's size, so a weight whose gradient
    # is near zero moves by rounding noise times a full step (seen: 1.5e-5)
    _parity(_forward_forward, x, y, y_neg, atol=5e-5)


# ---- regression/main.py: polynomial fit, manual SGD through param.data ---------------------
def _regression(torch, init, W, b, batches):
    F = _modules(torch, "nn.functional")[0]
    POLY_DEGREE = 4
    W_target = torch.from_numpy(W)  # port: torch.randn(POLY_DEGREE, 1) * 5, shared
    b_target = torch.from_numpy(b)  # port: torch.randn(1) * 5, shared

    def make_features(x):
        """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
        x = x.unsqueeze(1)
        return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        """Approximated function."""
        return x.mm(W_target) + b_target.item()

    def poly_desc(W, b):
        """Creates a string description of a polynomial."""
        result = "y = "
        for i, w in enumerate(W):
            result += "{:+.2f} x^{} ".format(w, i + 1)
        result += "{:+.2f}".format(b[0])
        return result

    def get_batch(random):  # port: the batch's torch.randn(batch_size) is an argument
        """Builds a batch i.e. (x, f(x)) pair."""
        x = make_features(random)
        y = f(x)
        return x, y

    # Define model
    fc = init(torch.nn.Linear(W_target.size(0), 1))
    losses = []
    for batch_idx, random in enumerate(batches, 1):  # port: for batch_idx in count(1)
        # Get data
        batch_x, batch_y = get_batch(torch.from_numpy(random))

        # Reset gradients
        fc.zero_grad()

        # Forward pass
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        losses.append(loss)

        # Backward pass
        output.backward()

        # Apply gradients
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)

        # Stop criterion
        if loss < 1e-3:
            break
    poly_desc(fc.weight.view(-1), fc.bias)  # port: printed; its rounding is not compared
    actual = poly_desc(W_target.view(-1), b_target)
    return {"fc": fc, "losses": losses, "desc": actual}


def test_regression(rng):
    W = (rng.standard_normal((4, 1)) * 5).astype(np.float32)
    b = (rng.standard_normal(1) * 5).astype(np.float32)
    batches = [rng.standard_normal(32).astype(np.float32) for _ in range(6)]
    _parity(_regression, W, b, batches, rtol=1e-4, atol=1e-4)


# ---- word_language_model/model.py + main.py: RNN / LSTM / GRU / Transformer language models --
def _word_lm_models(torch):
    """word_language_model/model.py, verbatim but for the imports."""
    import math

    nn, F = _modules(torch, "nn", "nn.functional")

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super(RNNModel, self).__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ["LSTM", "GRU"]:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                try:
                    nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
                except KeyError as e:
                    raise ValueError("""An invalid option for `--model` was supplied,
                                     options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']""") from e
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError("When using the tied flag, nhid must be equal to emsize")
                self.decoder.weight = self.encoder.weight

            self.init_weights()

            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            else:
                return weight.new_zeros(self.nlayers, bsz, self.nhid)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super(PositionalEncoding, self).__init__()
            self.dropout = nn.Dropout(p=dropout)

            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(
                torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model)
            )
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        """Container module with an encoder, a recurrent or transformer module, and a decoder."""

        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super(TransformerModel, self).__init__(
                d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers
            )
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)

            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)

            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None

            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return _picklable(torch, PositionalEncoding, RNNModel, TransformerModel)


def _word_lm(torch, init, kind, corpus, tmp):
    """word_language_model/main.py's batchify / get_batch / train / evaluate and its checkpoint
    round trip (torch.save of the whole model, torch.load under safe_globals)."""
    import math
    import os

    nn = _modules(torch, "nn")[0]
    PositionalEncoding, RNNModel, TransformerModel = _word_lm_models(torch)

    class args:  # port: argparse's defaults, smaller
        model, emsize, nhid, nlayers, lr, clip, epochs = kind, 8, 8, 2, 20, 0.25, 2
        batch_size, bptt, dropout, tied, nhead = 4, 5, 0.2, kind == "LSTM", 2
        use_optimizer, dry_run, log_interval = kind == "GRU", False, 200
        save = os.path.join(tmp, f"{torch.__name__}_model.pt")

    torch.manual_seed(1111)
    device = torch.device("cpu")
    ntokens = 11  # port: len(corpus.dictionary)

    def batchify(data, bsz):
        # Work out how cleanly we can divide the dataset into bsz parts.
        nbatch = data.size(0) // bsz
        # Trim off any extra elements that wouldn't cleanly fit (remainders).
        data = data.narrow(0, 0, nbatch * bsz)
        # Evenly divide the data across the bsz batches.
        data = data.view(bsz, -1).t().contiguous()
        return data.to(device)

    eval_batch_size = 3
    train_data = batchify(torch.from_numpy(corpus[:50]), args.batch_size)
    val_data = batchify(torch.from_numpy(corpus[50:70]), eval_batch_size)
    test_data = batchify(torch.from_numpy(corpus[70:]), eval_batch_size)

    if args.model == "Transformer":
        model = TransformerModel(
            ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout
        ).to(device)
    else:
        model = RNNModel(
            args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied
        ).to(device)
    model = _no_dropout(init(model), torch)

    criterion = nn.NLLLoss()
    if args.use_optimizer:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr / 1000)  # port: lr

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""

        if isinstance(h, torch.Tensor):
            return h.detach()
        else:
            return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i):
        seq_len = min(args.bptt, len(source) - 1 - i)
        data = source[i : i + seq_len]
        target = source[i + 1 : i + 1 + seq_len].view(-1)
        return data, target

    def evaluate(data_source):
        # Turn on evaluation mode which disables dropout.
        model.eval()
        total_loss = 0.0
        if args.model != "Transformer":
            hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i)
                if args.model == "Transformer":
                    output = model(data)
                    output = output.view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train():
        # Turn on training mode which enables dropout.
        model.train()
        if args.model != "Transformer":
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i)
            if args.use_optimizer:
                optimizer.zero_grad()
            else:
                model.zero_grad()
            if args.model == "Transformer":
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()

            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            if args.use_optimizer:
                optimizer.step()
            else:
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())  # port: kept, where the example prints it

    losses, val_losses = [], []
    lr = args.lr
    best_val_loss = None
    for epoch in range(1, args.epochs + 1):
        train()
        val_loss = evaluate(val_data)
        val_losses.append(val_loss)
        math.exp(val_loss)
        if not best_val_loss or val_loss < best_val_loss:
            with open(args.save, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0

    # Load the best saved model.
    with open(args.save, "rb") as f:
        if args.model == "Transformer":
            safe_globals = [
                PositionalEncoding,
                TransformerModel,
                torch.nn.functional.relu,
                torch.nn.modules.activation.MultiheadAttention,
                torch.nn.modules.container.ModuleList,
                torch.nn.modules.dropout.Dropout,
                torch.nn.modules.linear.Linear,
                torch.nn.modules.linear.NonDynamicallyQuantizableLinear,
                torch.nn.modules.normalization.LayerNorm,
                torch.nn.modules.sparse.Embedding,
                torch.nn.modules.transformer.TransformerEncoder,
                torch.nn.modules.transformer.TransformerEncoderLayer,
            ]
        else:
            safe_globals = [
                RNNModel,
                torch.nn.modules.dropout.Dropout,
                torch.nn.modules.linear.Linear,
                torch.nn.modules.rnn.GRU,
                torch.nn.modules.rnn.LSTM,
                torch.nn.modules.rnn.RNN,
                torch.nn.modules.sparse.Embedding,
            ]
        with torch.serialization.safe_globals(safe_globals):
            model = torch.load(f)
        if args.model in ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]:
            model.rnn.flatten_parameters()

    test_loss = evaluate(test_data)
    return {"model": model, "losses": losses, "val": val_losses, "test": test_loss}


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU", "Transformer"])
def test_word_language_model(rng, tmp_path, kind):
    corpus = rng.integers(0, 11, 88)
    _parity(_word_lm, kind, corpus, str(tmp_path), rtol=2e-4, atol=2e-5)


# ---- fixes the ports needed, one test each ---------------------------------------------------
def test_randint_high_then_size_keyword():
    """mnist_forward_forward: torch.randint(n, size=(1,)) is randint(0, n, (1,))."""
    for call in (lambda L: L.randint(9, size=(500,)), lambda L: L.randint(high=9, size=(500,))):
        v = call(pr).numpy()
        assert v.shape == call(torch).shape and v.min() >= 0 and v.max() <= 8
        assert len(np.unique(v)) == 9
    assert pr.randint(3, 5, (4,)).numpy().min() >= 3
    with pytest.raises(TypeError):
        pr.randint(size=(3,))


@pytest.mark.parametrize(
    "index",
    [
        (range(3), [0, 2, 1]),
        range(1, 3),
        (slice(None), (0, 3)),
        ((0, 2), (1, 1)),
        (slice(None), range(3, 0, -1)),
        (range(0),),
    ],
)
def test_range_and_tuple_entries_index_as_lists(index):
    """mnist_forward_forward: x_[range(n), y] = v; a range or a tuple inside an index is a
    sequence (an advanced index), in reads and writes."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    xt, xp = torch.from_numpy(a.copy()), pr.from_numpy(a.copy())
    np.testing.assert_array_equal(xp[index].numpy(), xt[index].numpy())
    xt[index], xp[index] = -1.0, -1.0
    np.testing.assert_array_equal(xp.numpy(), xt.numpy())


def test_nn_modules_files_name_torchs_classes():
    """word_language_model / super_resolution's safe_globals name classes by torch's files."""
    import pkgutil

    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        if info.name.startswith("_") or info.name == "linear_cross_entropy_options":
            continue
        tmod = importlib.import_module(f"torch.nn.modules.{info.name}")
        pmod = importlib.import_module(f"pyrite.nn.modules.{info.name}")
        for name in getattr(tmod, "__all__", ()):
            if isinstance(getattr(tmod, name), type):
                where = pr.nn if hasattr(torch.nn, name) else pmod
                assert getattr(pmod, name) is getattr(where, name), (info.name, name)
    out_proj = pr.nn.MultiheadAttention(4, 2).out_proj
    assert type(out_proj) is pr.nn.modules.linear.NonDynamicallyQuantizableLinear
    assert isinstance(out_proj, pr.nn.Linear)
    assert not hasattr(pr.nn, "NonDynamicallyQuantizableLinear")


class _Tied(pr.nn.Module):
    """A model whose class a pickle finds by name (module level), with a tied weight, a buffer,
    a non-persistent buffer and a plain attribute."""

    def __init__(self):
        super().__init__()
        self.emb = pr.nn.Embedding(5, 4)
        self.head = pr.nn.Linear(4, 5)
        self.head.weight = self.emb.weight
        self.register_buffer("pe", pr.arange(4.0))
        self.register_buffer("scratch", pr.ones(2), persistent=False)
        self.note = {"steps": 3}

    def forward(self, x):
        return self.head(self.emb(x) + self.pe)


def test_save_load_whole_module_weights_only_rule(tmp_path):
    """torch.save(model) / torch.load(f): pickled, its tensors the file's; weights_only=True
    (the default) admits the model's classes only when allowlisted, as torch's."""
    m = _Tied()
    path = tmp_path / "m.pt"
    with open(path, "wb") as f:
        pr.save(m, f)
    with pytest.raises(pr.io.UnpicklingError, match="_Tied"):
        pr.load(path)
    classes = [_Tied, pr.nn.Embedding, pr.nn.Linear]
    with pr.serialization.safe_globals(classes):
        with open(path, "rb") as f:
            back = pr.load(f)
    with pytest.raises(pickle.UnpicklingError):  # (the context is closed again)
        pr.load(path)
    x = pr.tensor([0, 3, 4])
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())
    assert back.head.weight is back.emb.weight and isinstance(back.head.weight, pr.nn.Parameter)
    assert [k for k, _ in back.named_buffers()] == ["pe", "scratch"]
    assert list(back.state_dict()) == list(m.state_dict()) and back.note == {"steps": 3}
    other = pr.load(path, weights_only=False)
    assert type(other) is _Tied and other.training
    pr.serialization.add_safe_globals(classes)
    try:
        assert all(c in pr.serialization.get_safe_globals() for c in classes)
        assert type(pr.load(path)) is _Tied
    finally:
        pr.serialization.clear_safe_globals()
    assert pr.serialization.get_safe_globals() == []
