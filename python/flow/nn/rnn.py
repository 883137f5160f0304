"""Recurrent layers: RNN, LSTM, GRU and their single-step cells RNNCell, LSTMCell, GRUCell, with
torch's constructor arguments, parameter names and shapes (``weight_ih_l{k}``, ``weight_hh_l{k}``,
``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}``, ``_reverse`` for the second direction), so a
torch state_dict loads, torch's default initialization (U(-1/sqrt(hidden), 1/sqrt(hidden)), the
distribution, not torch's random stream), torch's gate order (LSTM i, f, g, o; GRU r, z, n with
b_hn inside r * (W_hn h + b_hn)) and torch's input / output shapes, unbatched inputs included.

Note:
    Everything is composed from existing ops (linear, sigmoid / tanh / relu, slices, cat). Per layer
    and direction the input projection of *all* time steps is one ``linear`` (a single GEMM over
    seq_len * batch rows, b_ih included); the time loop then does one ``linear`` of the hidden
    state (with b_hh) per step plus the gate arithmetic, following torch's CPU cell formulas op for
    op (e.g. GRU's h' = (h - n) * z + n). The loop is ordinary Python over the static sequence
    length, so under ``@flow.jit`` it unrolls: a trace holds seq_len * num_layers * num_directions
    steps, each a GEMM and one fused elementwise kernel, and a new sequence length is a new variant
    (the steps' kernels are identical, so they compile once and are shared through the kernel
    cache). Outputs of the steps are joined with one ``cat`` per layer and direction. Dropout
    between layers (training mode) is ``F.dropout``.

    Under autocast the GEMMs run in the lower-precision type and the other ops follow their
    inputs, as in torch's composite CPU cells: with float32 inputs the LSTM cell state stays float32,
    so LSTM (without proj_size) and GRU outputs are float32, RNN and projected-LSTM outputs are in
    the lower type (torch's GRU, RNN and projected LSTM give the same dtypes and values). torch's
    plain LSTM module instead runs oneDNN / cuDNN kernels whose outputs are in the lower type; the
    values agree within that type's rounding.

    PackedSequence inputs are not supported (a NotImplementedError says so): pad the batch instead.
"""
import math
import numbers
import warnings

from .. import _creation
from .. import _dtype as D
from .. import amp as _amp
from .._dispatch import current_trace
from .._tensor import Tensor
from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _autocast_active():
    """Whether autocast applies here (eagerly, or in the graph being traced); torch skips its dtype check then."""
    ctx = current_trace()
    if ctx is not None:
        return ctx.graph.autocast is not None
    return any(_amp._state().values())


def _refuse_packed(name, input):
    if not isinstance(input, Tensor) and type(input).__name__ == "PackedSequence":
        raise NotImplementedError(f"flow: nn.{name} does not support PackedSequence inputs; pass a padded "
                                  "Tensor (seq_len, batch, input_size) instead")


def _squeeze(x, dim):
    s = list(x.shape)
    del s[dim % len(s)]
    return F._reshape(x, s)


def _chunks(x, n):
    """x's last dim split into n equal views (torch's unsafe_chunk(n, 1))."""
    k = x.shape[-1] // n
    return [F._slice(x, x.ndim - 1, i * k, (i + 1) * k) for i in range(n)]


# ---- one time step (torch's CPU cell formulas, aten/src/ATen/native/RNN.cpp) --------------------------
# gi: the input projection of this step (W_ih x + b_ih), computed for all steps at once by the caller.


def _rnn_step(mode, gi, h, c, w_hh, b_hh, w_hr=None):
    gh = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":  # gates added chunk by chunk, so the step's elementwise work is one kernel
        (hi, hf, hg, ho), (ii, if_, ig, io) = _chunks(gh, 4), _chunks(gi, 4)
        i, f, g, o = F.sigmoid(hi + ii), F.sigmoid(hf + if_), F.tanh(hg + ig), F.sigmoid(ho + io)
        c = f * c + i * g
        h = o * F.tanh(c)
        if w_hr is not None:
            h = F.linear(h, w_hr)
        return h, c
    if mode == "GRU":
        ir, iz, in_ = _chunks(gi, 3)
        hr, hz, hn = _chunks(gh, 3)
        r = F.sigmoid(hr + ir)
        z = F.sigmoid(hz + iz)
        n = F.tanh(in_ + hn * r)
        return (h - n) * z + n, None
    pre = gh + gi
    return (F.tanh(pre) if mode == "RNN_TANH" else F.relu(pre)), None


def _uniform_init(module):
    """torch's RNN and cell initialization: every parameter uniform in +-1/sqrt(hidden_size)."""
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -stdv, stdv)


# ---- multi-layer modules --------------------------------------------------------------------------------


class RNNBase(Module):
    """The multi-layer recurrent module of RNN, LSTM and GRU (torch.nn.RNNBase)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        for name, v in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(v, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
        for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int):
                raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
            if v <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        dt = dtype or D.float32
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * dirs
            for direction in range(dirs):
                shapes = [("weight_ih_l{}{}", (gate_size, layer_input)), ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr_l{}{}", (proj_size, hidden_size))]
                names = []
                for fmt, shape in shapes:
                    name = fmt.format(layer, "_reverse" if direction == 1 else "")
                    setattr(self, name, Parameter(_creation.empty(*shape, dtype=dt, device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self)

    def flatten_parameters(self):
        """A no-op (torch packs weights for cuDNN here)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _weights(self, layer, direction):
        sfx = f"l{layer}" + ("_reverse" if direction == 1 else "")
        p = self._parameters
        return (p["weight_ih_" + sfx], p["weight_hh_" + sfx], p.get("bias_ih_" + sfx), p.get("bias_hh_" + sfx),
                p.get("weight_hr_" + sfx))

    # ---- argument checks (torch's messages) -----------------------------------------------------------

    def check_input(self, input):
        w = self._parameters["weight_ih_l0"]
        if input.dtype != w.dtype and not _autocast_active():
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). Convert "
                             f"input: input.to({w.dtype}), or convert model: model.to({input.dtype})")
        if input.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.ndim}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        if input.shape[1 if self.batch_first else 0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")

    def get_expected_hidden_size(self, input):
        batch = input.shape[0] if self.batch_first else input.shape[1]
        dirs = 2 if self.bidirectional else 1
        return (self.num_layers * dirs, batch, self.proj_size if self.proj_size > 0 else self.hidden_size)

    @staticmethod
    def check_hidden_size(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def check_forward_args(self, input, hidden):
        self.check_input(input)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input))

    # ---- forward ----------------------------------------------------------------------------------------

    def _prepare(self, name, input, hx):
        """Validates the input, adds the batch dim of an unbatched one; returns (input, hx, batched)."""
        _refuse_packed(name, input)
        if input.ndim not in (2, 3):
            tensor = " tensor" if name == "RNN" else ""  # torch's wording differs by class
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D{tensor} instead")
        batched = input.ndim == 3
        if not batched:
            input = F._unsqueeze(input, 0 if self.batch_first else 1)
            if hx is not None:
                if hx.ndim != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.ndim}-D tensor")
                hx = F._unsqueeze(hx, 1)
        elif hx is not None and hx.ndim != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.ndim}-D tensor")
        return input, hx, batched

    def _zeros(self, input, size):
        dirs = 2 if self.bidirectional else 1
        batch = input.shape[0] if self.batch_first else input.shape[1]
        return _creation.zeros(self.num_layers * dirs, batch, size, dtype=input.dtype, device=input.device)

    def _run(self, input, hx, cx):
        """The stacked layers over input [T, N, I] (or [N, T, I]); returns (output, h_n, c_n)."""
        tdim = 1 if self.batch_first else 0
        steps = input.shape[tdim]
        dirs = 2 if self.bidirectional else 1
        x = input
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                gi = F.linear(x, w_ih, b_ih)  # every time step's input projection: one GEMM
                k = layer * dirs + direction
                h = F._select(hx, 0, k)
                c = F._select(cx, 0, k) if cx is not None else None
                ys = [None] * steps
                for t in (range(steps) if direction == 0 else range(steps - 1, -1, -1)):
                    h, c = _rnn_step(self.mode, F._select(gi, tdim, t), h, c, w_hh, b_hh, w_hr)
                    ys[t] = F._unsqueeze(h, tdim)
                outs.append(F._cat(ys, tdim))
                h_n.append(F._unsqueeze(h, 0))
                if c is not None:
                    c_n.append(F._unsqueeze(c, 0))
            x = F._cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        return x, F._cat(h_n, 0), (F._cat(c_n, 0) if c_n else None)

    def _forward_single_state(self, name, input, hx):
        """RNN and GRU: (output, h_n)."""
        input, hx, batched = self._prepare(name, input, hx)
        if hx is None:
            hx = self._zeros(input, self.hidden_size)
        self.check_forward_args(input, hx)
        output, h_n, _ = self._run(input, hx, None)
        if not batched:
            return _squeeze(output, 0 if self.batch_first else 1), _squeeze(h_n, 1)
        return output, h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if kwargs:
            raise TypeError(f"RNN.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._forward_single_state("RNN", input, hx)


class GRU(RNNBase):
    """Gated recurrent unit, torch's gates r, z, n (n = tanh(W_in x + b_in + r * (W_hn h + b_hn)))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if kwargs:
            raise TypeError(f"GRU.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._forward_single_state("GRU", input, hx)


class LSTM(RNNBase):
    """Long short-term memory, torch's gates i, f, g, o; proj_size > 0 projects h by weight_hr."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def get_expected_cell_size(self, input):
        batch = input.shape[0] if self.batch_first else input.shape[1]
        return (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)

    def check_forward_args(self, input, hidden):
        self.check_input(input)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input), "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input), "Expected hidden[1] size {}, got {}")

    def forward(self, input, hx=None):
        _refuse_packed("LSTM", input)
        if input.ndim not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.ndim}D instead")
        batched = input.ndim == 3
        bdim = 0 if self.batch_first else 1
        if not batched:
            input = F._unsqueeze(input, bdim)
        if hx is None:
            hx = (self._zeros(input, self.proj_size if self.proj_size > 0 else self.hidden_size),
                  self._zeros(input, self.hidden_size))
        else:
            want = 3 if batched else 2
            if hx[0].ndim != want or hx[1].ndim != want:
                raise RuntimeError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx should "
                                   f"also be {want}-D but got ({hx[0].ndim}-D, {hx[1].ndim}-D) tensors")
            if not batched:
                hx = (F._unsqueeze(hx[0], 1), F._unsqueeze(hx[1], 1))
        self.check_forward_args(input, hx)
        output, h_n, c_n = self._run(input, hx[0], hx[1])
        if not batched:
            return _squeeze(output, bdim), (_squeeze(h_n, 1), _squeeze(c_n, 1))
        return output, (h_n, c_n)


# ---- cells ----------------------------------------------------------------------------------------------


class RNNCellBase(Module):
    """weight_ih [chunks * hidden, input], weight_hh [chunks * hidden, hidden], bias_ih / bias_hh."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        dt = dtype or D.float32
        self.weight_ih = Parameter(_creation.empty(num_chunks * hidden_size, input_size, dtype=dt, device=device))
        self.weight_hh = Parameter(_creation.empty(num_chunks * hidden_size, hidden_size, dtype=dt, device=device))
        if bias:
            self.bias_ih = Parameter(_creation.empty(num_chunks * hidden_size, dtype=dt, device=device))
            self.bias_hh = Parameter(_creation.empty(num_chunks * hidden_size, dtype=dt, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _check(self, name, input, states):
        """torch's cell checks (RNN.cpp check_rnn_cell_forward_input / _hidden)."""
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        for k, h in enumerate(states):
            if h.ndim != 2:
                raise RuntimeError(f"Expected 2D hidden{k} (batch x hidden_size), but got {h.ndim}D tensor")
            if h.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} batch size "
                                   f"{h.shape[0]}")
            if h.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.shape[1]}, expected "
                                   f"{self.hidden_size}")

    def _batch(self, name, input, states, what):
        """Adds the batch dim of an unbatched call; zeros for missing states. Returns (input, states, batched)."""
        _refuse_packed(name, input)
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for k, h in enumerate(states or ()):
            if h.ndim not in (1, 2):
                raise ValueError(f"{name}: Expected {what(k)} to be 1D or 2D, got {h.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = F._unsqueeze(input, 0)
        if states is None:
            return input, None, batched
        return input, [h if batched else F._unsqueeze(h, 0) for h in states], batched

    def _zeros(self, input):
        return _creation.zeros(input.shape[0], self.hidden_size, dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """One Elman RNN step: h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, st, batched = self._batch("RNNCell", input, None if hx is None else [hx], lambda k: "hidden")
        hx = self._zeros(input) if st is None else st[0]
        self._check("RNNCell", input, [hx])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        h, _ = _rnn_step(mode, F.linear(input, self.weight_ih, self.bias_ih), hx, None, self.weight_hh, self.bias_hh)
        return h if batched else _squeeze(h, 0)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, st, batched = self._batch("LSTMCell", input, None if hx is None else list(hx), lambda k: f"hx[{k}]")
        if st is None:
            z = self._zeros(input)
            st = [z, z]
        self._check("LSTMCell", input, st)
        h, c = _rnn_step("LSTM", F.linear(input, self.weight_ih, self.bias_ih), st[0], st[1], self.weight_hh,
                         self.bias_hh)
        return (h, c) if batched else (_squeeze(h, 0), _squeeze(c, 0))


class GRUCell(RNNCellBase):
    """One GRU step: h' = (1 - z) * n + z * h."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, st, batched = self._batch("GRUCell", input, None if hx is None else [hx], lambda k: "hidden")
        hx = self._zeros(input) if st is None else st[0]
        self._check("GRUCell", input, [hx])
        h, _ = _rnn_step("GRU", F.linear(input, self.weight_ih, self.bias_ih), hx, None, self.weight_hh, self.bias_hh)
        return h if batched else _squeeze(h, 0)
