"""@flow.jit against eager flow and torch: fused kernels, kernel counts, guards, modules with
parameters, the kernel cache across processes, and eager mode's shape-generic kernels."""
import json
import os
import subprocess
import sys
import textwrap

from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flow
from conftest import assert_same, make, products_atol, to_flow, to_torch

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def chain(x, a, b):
    return flow.relu(x * a + b) * flow.sigmoid(x) + 1.0


def torch_chain(x, a, b):
    return torch.relu(x * a + b) * torch.sigmoid(x) + 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_chain_jit_eager_torch_one_kernel(dtype, gen):
    f = flow.jit(chain)
    for shape in [(1031,), (33, 7), (1,), (0, 4)]:
        x, a, b = (make(shape, dtype, gen, special=True) for _ in range(3))
        expected = torch_chain(x, a, b)
        fx, fa, fb = to_flow(x), to_flow(a), to_flow(b)
        eager = chain(fx, fa, fb)
        jitted = f(fx, fa, fb)
        rtol = 4e-6 if dtype == torch.float32 else None
        assert_same(eager, expected, rtol=rtol, msg=f"eager {shape}")
        assert_same(jitted, expected, rtol=rtol, msg=f"jit {shape}")
        assert f.num_kernels == 1, f.explain(with_source=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_elementwise_work_read_by_a_cat_or_pad_is_computed_in_its_kernel(dtype, layout, gen, monkeypatch):
    """ShuffleNet's relu -> cat and a pad of an activation: the elementwise producers run inside
    the cat's or pad's kernel, at the indices it reads (one kernel), with torch's values."""
    def f(m, a, b, bias):
        y = m.cat([m.relu(a), m.sigmoid(b) * bias, a], 1)
        return y, m.nn.functional.pad(m.tanh(b) + 1.0, (1, 2, 0, 1), value=-1.0)

    for shape in [(2, 3, 5, 7), (1, 1, 1, 1), (2, 4, 3, 17)]:
        a, b = make(shape, dtype, gen, special=True), make(shape, dtype, gen, special=True)
        if layout == "channels_last":
            a, b = a.contiguous(memory_format=torch.channels_last), b.contiguous(memory_format=torch.channels_last)
        bias = make((shape[1], 1, 1), dtype, gen)
        want = f(torch, a, b, bias)
        jf = flow.jit(lambda *t: f(flow, *t))
        fa, fb = to_flow(a), to_flow(b)
        if layout == "channels_last":
            fa, fb = fa.contiguous(memory_format=flow.channels_last), fb.contiguous(memory_format=flow.channels_last)
        got = jf(fa, fb, to_flow(bias))
        for g, w in zip(got, want):
            assert_same(g, w, msg=f"{shape} {layout}")
        assert jf.num_kernels == 2, jf.explain(with_source=False)
    monkeypatch.setenv("FLOW_FUSE_INLINE", "0")  # the producers as kernels of their own
    off = flow.jit(lambda *t: f(flow, *t))
    for g, w in zip(off(fa, fb, to_flow(bias)), want):
        assert_same(g, w, msg="FLOW_FUSE_INLINE=0")
    assert off.num_kernels == 5, off.explain(with_source=False)


def test_unfused_chain_has_one_kernel_per_op(gen):
    f = flow.jit(chain, fuse=False)
    x, a, b = (make((100,), torch.float32, gen) for _ in range(3))
    assert_same(f(to_flow(x), to_flow(a), to_flow(b)), torch_chain(x, a, b), rtol=4e-6)
    assert f.num_kernels == 6, f.explain(with_source=False)


def test_chain_launches_one_kernel_per_call(gen):
    f = flow.jit(chain)
    x, a, b = (to_flow(make((4096,), torch.float32, gen)) for _ in range(3))
    f(x, a, b)
    flow.reset_launch_count()
    f(x, a, b)
    f(x, a, b)
    assert flow.launch_count() == 2
    flow.reset_launch_count()
    chain(x, a, b)  # eager: one kernel per op
    assert flow.launch_count() == 6


def test_chain_with_broadcast_and_non_contiguous(gen):
    f = flow.jit(chain)
    xb = make((9, 17), torch.float32, gen)
    a = make((17,), torch.float32, gen)
    b = make((9, 1), torch.float32, gen)
    x = xb.t()  # (17, 9), transposed
    fx = to_flow(xb).t()
    assert not fx.is_contiguous()
    # shapes: x (17, 9), a (17, 1) -> use a view so a broadcasts along dim 1
    fa = to_flow(a).unsqueeze(1)
    fb = to_flow(b.reshape(9))
    r = f(fx, fa, fb)
    assert_same(r, torch_chain(x, a.unsqueeze(1), b.reshape(9)), rtol=4e-6)
    assert f.num_kernels == 1


def softmax_fn(x):
    return flow.softmax(x, -1)


def log_softmax_fn(x):
    return flow.log_softmax(x, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_softmax_jit(dtype, gen):
    fs, fl = flow.jit(softmax_fn), flow.jit(log_softmax_fn)
    for shape in [(8, 33), (3, 1031), (5, 1), (2, 3, 7)]:
        x = make(shape, dtype, gen)
        tol = {torch.float32: (1e-5, 1e-6), torch.float64: (1e-12, 1e-12)}.get(dtype, (None, None))
        ltol = tol if dtype != torch.float16 else (1e-3, 4e-3)  # see test_ops.softmax_tol
        assert_same(fs(to_flow(x)), torch.softmax(x, -1), *tol, msg=f"softmax {shape}")
        assert_same(fl(to_flow(x)), torch.log_softmax(x, -1), *ltol, msg=f"log_softmax {shape}")
        assert fs.num_kernels == 1, fs.explain(with_source=False)
        assert fl.num_kernels <= 2, fl.explain(with_source=False)


def layer_norm_like(x, w, b):
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    return d * flow.rsqrt(var + 1e-5) * w + b


def test_layer_norm_like(gen):
    f = flow.jit(layer_norm_like)
    for shape in [(4, 64), (3, 5, 33), (1, 1031)]:
        x = make(shape, torch.float32, gen)
        w = make(shape[-1:], torch.float32, gen)
        b = make(shape[-1:], torch.float32, gen)
        expected = TF.layer_norm(x, shape[-1:], w, b, eps=1e-5)
        got = f(to_flow(x), to_flow(w), to_flow(b))
        assert_same(got, expected, rtol=1e-4, atol=1e-5, msg=str(shape))
        assert_same(layer_norm_like(to_flow(x), to_flow(w), to_flow(b)), expected, rtol=1e-4, atol=1e-5)
        assert 1 <= f.num_kernels <= 3, f.explain(with_source=False)


def window_sums_over_tables(m, x, table, row):
    w = m.nn.functional.pad(x, (1, 1, 1, 1)).unfold(2, 3, 3).unfold(3, 3, 3)
    return w.sum((4, 5)) / table, x.mean(1) * row + 1


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_reduction_epilogue_reads_operands_broadcast_over_kept_dims(channels_last, gen):
    # Sums over window views divided by an [OH, OW] table (avg_pool2d's old form): operands indexed
    # by some kept loop variables only. This once tripped the LLVM backend (unbound loop variable).
    f = flow.jit(lambda x, table, row: window_sums_over_tables(flow, x, table, row))
    for shape in [(2, 3, 8, 8), (1, 5, 7, 10)]:
        x = make(shape, torch.float32, gen)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        table = make(((shape[2] - 1) // 3 + 1, (shape[3] - 1) // 3 + 1), torch.float32, gen).abs() + 0.5
        row = make(shape[3:], torch.float32, gen)
        expected = window_sums_over_tables(torch, x, table, row)
        got = f(to_flow(x), to_flow(table), to_flow(row))
        for g, e in zip(got, expected):
            assert_same(g, e, rtol=1e-5, atol=1e-6, msg=str(shape))


def multi_output(x, y):
    s = x + y
    return s, flow.exp(s) * 2, {"max": s.amax(-1), "mean": s.mean()}


def test_multi_output(gen):
    f = flow.jit(multi_output)
    x, y = make((6, 10), torch.float32, gen), make((10,), torch.float32, gen)
    a, b, d = f(to_flow(x), to_flow(y))
    s = x + y
    assert_same(a, s)
    assert_same(b, torch.exp(s) * 2, rtol=4e-6)
    assert set(d) == {"max", "mean"}
    assert_same(d["max"], s.amax(-1))
    assert_same(d["mean"], s.mean(), rtol=1e-5)


def test_returns_input_and_constants(gen):
    @flow.jit
    def f(x, y):
        return x, y * 2, 3, None

    x, y = to_flow(make((3,), torch.float32, gen)), to_flow(make((3,), torch.float32, gen))
    rx, ry, three, none = f(x, y)
    assert rx is x and three == 3 and none is None
    assert_same(ry, to_torch(y) * 2)


def test_python_scalars_and_control_flow_are_specialized(gen):
    calls = []

    @flow.jit
    def f(x, scale, use_relu):
        calls.append(1)
        y = x * scale
        if use_relu:
            y = flow.relu(y)
        return y

    x = make((5, 5), torch.float32, gen)
    fx = to_flow(x)
    assert_same(f(fx, 2.0, True), torch.relu(x * 2.0))
    assert_same(f(fx, 2.0, True), torch.relu(x * 2.0))
    assert len(calls) == 1
    assert_same(f(fx, 3.0, True), torch.relu(x * 3.0))
    assert_same(f(fx, 3.0, False), x * 3.0)
    assert len(calls) == 3 and f.num_variants == 3


def test_guards_recompile_on_new_shape_dtype_layout_only(gen):
    f = flow.jit(chain)
    x, a, b = (to_flow(make((64, 32), torch.float32, gen)) for _ in range(3))
    f(x, a, b)
    assert f.num_traces == 1
    flow.reset_cache_stats()
    f(x, a, b)
    f(to_flow(make((64, 32), torch.float32, gen)), a, b)  # same key, new data
    assert f.num_traces == 1
    st = flow.cache_stats()
    assert st["misses"] == 0 and st["stores"] == 0, st
    f(to_flow(make((65, 32), torch.float32, gen)), *(to_flow(make((65, 32), torch.float32, gen)) for _ in range(2)))
    assert f.num_traces == 2  # new shape
    f(x.double(), a.double(), b.double())
    assert f.num_traces == 3  # new dtype
    xt = to_flow(make((32, 64), torch.float32, gen)).t()
    r = f(xt, a, b)
    assert f.num_traces == 4  # new layout
    assert_same(r, torch_chain(to_torch(xt), to_torch(a), to_torch(b)), rtol=4e-6)
    f(x, a, b)  # the first variant is still there
    assert f.num_traces == 4 and f.num_variants == 4


def test_the_same_normalization_on_other_values_and_row_lengths_is_one_kernel(gen):
    # Two layer norms and two means over rows of 64 and 1000: the kernels differ only in the graph
    # values they read (after which schedulers name let-bound values and local buffers) and in the
    # row length (which picks the GPU block size, unused on the CPU). Each pair is one cache key.
    def fn(x, y):
        return layer_norm_like(x, 1.0, 0.0), layer_norm_like(y, 1.0, 0.0), (x * 2).mean(-1), (y * 2).mean(-1)

    f = flow.jit(fn)
    x, y = make((4, 64), torch.float32, gen), make((3, 1000), torch.float32, gen)
    got = f(to_flow(x), to_flow(y))
    for g, e in zip(got, (TF.layer_norm(x, (64,)), TF.layer_norm(y, (1000,)), (x * 2).mean(-1), (y * 2).mean(-1))):
        assert_same(g, e, rtol=1e-4, atol=1e-5)
    text = f.explain(with_source=False)
    keys = [line.split("key=")[1].split()[0] for line in text.splitlines() if "key=" in line]
    assert len(keys) == 4 and len(set(keys)) == 2, text


def test_same_graph_second_function_compiles_nothing(gen):
    # An inlined constant no earlier run has compiled into the on-disk cache: drawn from the OS,
    # not from the seeded generator, so rerunning with the same FLOW_TEST_SEED stays cold.
    c = 1.0 + int.from_bytes(os.urandom(6), "little") / 2.0**48

    def fn(x):
        return flow.tanh(x * c) + c

    x = to_flow(make((128,), torch.float32, gen))
    f = flow.jit(fn)
    f(x)
    assert f.num_compiled == 1
    g = flow.jit(fn)
    flow.reset_cache_stats()
    g(x)
    assert flow.cache_stats()["misses"] == 0
    assert g.num_compiled == 0  # the kernel came from the cache, not from this compile


class Scale(flow.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = flow.nn.Parameter(flow.ones(n) * 2)
        self.bias = flow.nn.Parameter(flow.zeros(n) + 0.5)

    def forward(self, x):
        y = self.scale * x + self.bias
        if self.training:
            y = y * 0.5
        return flow.nn.functional.gelu(y)


def torch_scale(m, x, training):
    y = to_torch(m.scale) * x + to_torch(m.bias)
    if training:
        y = y * 0.5
    return TF.gelu(y)


def test_module_instance_with_parameters(gen):
    m = Scale(16)
    assert [n for n, _ in m.named_parameters()] == ["scale", "bias"]
    jm = flow.jit(m)
    x = make((4, 16), torch.float32, gen)
    assert_same(jm(to_flow(x)), torch_scale(m, x, True), rtol=4e-6)
    assert jm.num_kernels == 1
    # new parameter data of the same shape: no retrace, new values used
    m.scale.data = to_flow(make((16,), torch.float32, gen))
    m.bias.copy_(to_flow(make((16,), torch.float32, gen)))
    assert_same(jm(to_flow(x)), torch_scale(m, x, True), rtol=4e-6)
    assert jm.num_traces == 1
    # training flag is part of the guard
    m.eval()
    assert_same(jm(to_flow(x)), torch_scale(m, x, False), rtol=4e-6)
    assert jm.num_traces == 2
    m.train()
    jm(to_flow(x))
    assert jm.num_traces == 2
    # a parameter of a new shape retraces
    m.scale = flow.nn.Parameter(flow.ones(4, 16))
    assert_same(jm(to_flow(x)), torch_scale(m, x, True), rtol=4e-6)
    assert jm.num_traces == 3


def test_guards_see_a_new_layout_through_data(gen):
    """`.data =` gives the same Parameter a new flow._C tensor; the guards compare its layout again
    (they skip the comparison only for the very tensor they saw last)."""
    m = flow.nn.Linear(8, 6)
    jm = flow.jit(m)
    x = make((5, 8), torch.float32, gen)

    def check():
        w, b = to_torch(m.weight), to_torch(m.bias)
        atol = products_atol(x.abs() @ w.abs().T + b.abs(), terms=9)
        assert_same(jm(to_flow(x)), x @ w.T + b, rtol=1e-5, atol=atol)

    check()
    w = make((8, 6), torch.float32, gen)
    m.weight.data = to_flow(w).t()  # [6, 8] with transposed strides
    check()
    assert jm.num_traces == 2
    m.weight.data = to_flow(w.T.contiguous())  # contiguous again: new values, the first layout
    check()
    assert jm.num_traces == 3
    m.weight.data = to_flow(make((6, 8), torch.float32, gen))  # same layout: no retrace
    check()
    assert jm.num_traces == 3


def test_every_way_of_changing_module_state_is_seen(gen, monkeypatch):
    """flow.jit walks the module tree again only after a parameter, buffer or child changed
    (flow/nn/_module_store.py). Each way of changing one is seen by the next call: attribute
    assignment, writes to the stores themselves (setitem, pop, update, |=), a replaced child, a
    replaced store, register_buffer; and the walk is skipped while nothing changed."""
    from flow import _jit

    walks = []
    real_walk = _jit._walk_module_tensors
    monkeypatch.setattr(_jit, "_walk_module_tensors", lambda m: walks.append(1) or real_walk(m))
    m = flow.nn.Sequential(flow.nn.Linear(8, 6), flow.nn.ReLU(), flow.nn.Linear(6, 4))
    jm = flow.jit(m)
    x = make((5, 8), torch.float32, gen)

    def want():
        h = torch.relu(x @ to_torch(m[0].weight).T + to_torch(m[0].bias))
        return h @ to_torch(m[2].weight).T + to_torch(m[2].bias)

    def check(msg):
        assert_same(jm(to_flow(x)), want(), rtol=3e-5, atol=1e-5, msg=msg)

    def param(*shape):
        return flow.nn.Parameter(to_flow(make(shape, torch.float32, gen)))

    check("first call")
    walks.clear()
    for _ in range(3):
        check("unchanged")
    assert not walks, "the module tree was walked again although nothing changed"
    m[0].weight = param(6, 8)
    check("attribute assignment")
    m[2]._parameters["bias"] = param(4)
    check("store setitem")
    m[2]._parameters.update({"weight": param(4, 6)})
    check("store update")
    m[0]._parameters |= {"bias": param(6)}
    check("store |=")
    m._modules["2"] = flow.nn.Linear(6, 4)
    check("child replaced through the store")
    m[2]._parameters = OrderedDict(weight=param(4, 6), bias=param(4))
    check("a whole store replaced")
    m[0].register_buffer("unused", flow.ones(3))
    check("register_buffer")
    assert jm.num_traces == 1
    m[2].weight = flow.nn.Parameter(to_flow(make((6, 4), torch.float32, gen)).t())  # a new layout: retraced
    check("new layout")
    assert jm.num_traces == 2
    m[2]._parameters.pop("bias")
    with pytest.raises(AttributeError, match="bias"):
        jm(to_flow(x))  # seen: the retrace finds no bias, as torch's forward would
    m[2].bias = param(4)
    check("bias back")
    m[0]._parameters = OrderedDict()  # an empty store: nothing set through it, still a change
    with pytest.raises(AttributeError, match="weight"):
        jm(to_flow(x))


def test_replaced_weights_are_not_kept_by_variants_not_called(gen):
    """A variant keeps weak references only (its guards and its fast path), and its graph-input
    template is dropped at the function's next call after a change: after a weight is replaced (or
    given new data) and only another variant runs, the old weight and its storage are freed."""
    import gc
    import weakref

    m = flow.nn.Linear(8, 6)
    jm = flow.jit(m)
    for rows in (5, 7):  # two variants, both with an armed fast path
        jm(to_flow(make((rows, 8), torch.float32, gen)))
        jm(to_flow(make((rows, 8), torch.float32, gen)))
    assert jm.num_variants == 2
    other = flow.jit(m)  # a second jitted function of the module, never called again
    other(to_flow(make((3, 8), torch.float32, gen)))
    other(to_flow(make((3, 8), torch.float32, gen)))
    old, old_c = weakref.ref(m.weight), weakref.ref(m.weight._c)
    m.weight = flow.nn.Parameter(to_flow(make((6, 8), torch.float32, gen)))
    x = make((5, 8), torch.float32, gen)
    assert_same(jm(to_flow(x)), x @ to_torch(m.weight).T + to_torch(m.bias), rtol=3e-5, atol=1e-5)
    gc.collect()
    assert old() is None and old_c() is None, "a variant keeps the replaced weight alive"
    old_c = weakref.ref(m.bias._c)
    m.bias.data = to_flow(make((6,), torch.float32, gen))  # new data, the same Parameter
    assert_same(jm(to_flow(x)), x @ to_torch(m.weight).T + to_torch(m.bias), rtol=3e-5, atol=1e-5)
    gc.collect()
    assert old_c() is None, "a variant keeps the bias's old data alive"
    # Entry points other than a call (profile, autotune) bind a variant's inputs directly: a
    # template from before a change is not used there either.
    v, flat = jm._jit._latest, [to_flow(x)]
    v.bound(flat, v.check())
    m.bias.data = to_flow(make((6,), torch.float32, gen))
    assert any(c is m.bias._c for c in v.bound(flat, v.check())), "a stale template bound the old bias"


def test_calls_run_on_a_checked_input_template(gen):
    """A repeated call passes only its arguments to the executable (the weights stay in a
    flow._C.InputTemplate, checked once): the template has every graph input with the argument slots
    empty, keeps no argument alive after the call, checks what is passed, and serves threads calling
    at once (a second caller runs on a copy)."""
    import threading

    m = flow.nn.Sequential(flow.nn.Linear(8, 6), flow.nn.ReLU(), flow.nn.Linear(6, 3))
    jm = flow.jit(m)

    def want(x):
        w0, b0, w2, b2 = (to_torch(t) for t in (m[0].weight, m[0].bias, m[2].weight, m[2].bias))
        return torch.relu(x @ w0.T + b0) @ w2.T + b2

    x = make((5, 8), torch.float32, gen)
    assert_same(jm(to_flow(x)), want(x), rtol=3e-5, atol=1e-5)
    v = jm._jit._latest
    epoch, template = v._template
    assert template.num_inputs == len(v.bindings) == 5
    assert template.arg_slots == [slot for slot, (kind, _) in enumerate(v.bindings) if kind == "arg"]

    arg = to_flow(make((5, 8), torch.float32, gen))
    refs = arg._c._storage_refs
    assert_same(jm(arg), want(to_torch(arg)), rtol=3e-5, atol=1e-5)
    assert v._template[1] is template, "the call did not run on the kept template"
    assert arg._c._storage_refs == refs, "the input template keeps the last call's argument alive"

    with pytest.raises(ValueError, match=r"input 0 is float64\[5, 8\] but the graph was compiled for"):
        v.exe.run_template(template, [to_flow(make((5, 8), torch.float64, gen))._c])
    with pytest.raises(ValueError, match="has strides"):
        v.exe.run_template(template, [to_flow(make((8, 5), torch.float32, gen)).t()._c])
    with pytest.raises(ValueError, match="expected 1 arguments, got 2"):
        v.exe.run_template(template, [to_flow(x)._c, to_flow(x)._c])
    with pytest.raises(TypeError, match="not a flow._C.Tensor"):
        v.exe.run_template(template, [x])
    assert_same(jm(to_flow(x)), want(x), rtol=3e-5, atol=1e-5)  # a failed check leaves it usable

    xs = [make((5, 8), torch.float32, gen) for _ in range(4)]
    args = [to_flow(x) for x in xs]
    errors = []

    def caller(k):
        try:
            for _ in range(40):
                assert_same(jm(args[k]), want(xs[k]), rtol=3e-5, atol=1e-5, msg=f"thread {k}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert jm.num_traces == 1
    assert [a._c._storage_refs for a in args] == [1] * len(args), "a template keeps a thread's argument alive"
    other = flow.jit(m)
    other(to_flow(x))
    other(to_flow(x))
    with pytest.raises(ValueError, match="made by another executable"):
        v.exe.run_template(other._jit._latest._template[1], [to_flow(x)._c])


def test_captured_tensors_rebound_by_data_or_out_are_seen(gen):
    """A tensor a function captures (not a module's): new data through `.data =` is used; an out=
    that resizes it retraces for its new shape."""
    g = to_flow(make((3,), torch.float32, gen))
    f = flow.jit(lambda x: x * 2 + g)
    x = make((3,), torch.float32, gen)
    for _ in range(2):
        assert_same(f(to_flow(x)), x * 2 + to_torch(g))
    g.data = to_flow(make((3,), torch.float32, gen))
    assert_same(f(to_flow(x)), x * 2 + to_torch(g))
    flow.add(flow.ones(4), flow.ones(4), out=g)  # resized to 4 elements
    x4 = make((4,), torch.float32, gen)
    assert_same(f(to_flow(x4)), x4 * 2 + 2)
    assert f.num_traces == 2


def test_transformer_stacks_are_walked_once(gen, monkeypatch):
    """TransformerEncoder's cloned layers hold ModuleStores too, so their walk is cached."""
    from flow import _jit

    walks = []
    real_walk = _jit._walk_module_tensors
    monkeypatch.setattr(_jit, "_walk_module_tensors", lambda m: walks.append(1) or real_walk(m))
    layer = flow.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    enc = flow.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    jm = flow.jit(enc)
    x = to_flow(make((2, 3, 16), torch.float32, gen))
    first = jm(x)
    walks.clear()
    assert_same(jm(x), to_torch(first))
    assert not walks, "the transformer's module tree was walked again although nothing changed"


def test_tied_parameters_keep_their_first_name(gen):
    """A parameter shared by two modules is bound once, under its first name (named_parameters'
    order), and both uses read it."""
    enc, dec = flow.nn.Linear(4, 4, bias=False), flow.nn.Linear(4, 4, bias=False)
    dec.weight = enc.weight
    m = flow.nn.Sequential(enc, flow.nn.ReLU(), dec)
    assert [n for n, _ in m.named_parameters()] == ["0.weight"]
    jm = flow.jit(m)
    x = make((3, 4), torch.float32, gen)

    def check():
        w = to_torch(enc.weight)
        atol = products_atol((x.abs() @ w.abs().T) @ w.abs().T, terms=8)
        assert_same(jm(to_flow(x)), torch.relu(x @ w.T) @ w.T, rtol=1e-5, atol=atol)

    check()
    enc.weight.data = to_flow(make((4, 4), torch.float32, gen))
    check()
    assert jm.num_traces == 1


def test_module_class_decorator(gen):
    @flow.jit
    class Jitted(Scale):
        pass

    m = Jitted(8)
    x = make((3, 8), torch.float32, gen)
    assert_same(m(to_flow(x)), torch_scale(m, x, True), rtol=4e-6)
    assert m.num_kernels == 1
    assert "graph" in m.explain(with_source=False)
    assert isinstance(m, Scale) and isinstance(m, flow.nn.Module)


def test_nested_modules_and_jitted_helper(gen):
    helper = flow.jit(lambda x: flow.sigmoid(x) * x)

    class Outer(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scale(6)
            self.act = flow.nn.SiLU()

        def forward(self, x):
            return helper(self.act(self.inner(x)))  # the jitted helper is inlined into the trace

    m = Outer()
    assert [n for n, _ in m.named_parameters()] == ["inner.scale", "inner.bias"]
    jm = flow.jit(m)
    x = make((2, 6), torch.float32, gen)
    y = TF.silu(torch_scale(m.inner, x, True))
    assert_same(jm(to_flow(x)), torch.sigmoid(y) * y, rtol=1e-5)
    assert jm.num_kernels == 1, jm.explain(with_source=False)


def test_captured_global_tensor(gen):
    w = to_flow(make((5,), torch.float32, gen))

    @flow.jit
    def f(x):
        return x * w + flow.tensor(1.0)

    x = make((3, 5), torch.float32, gen)
    assert_same(f(to_flow(x)), x * to_torch(w) + 1.0)
    w.fill_(2.0)  # captured tensors are bound by object at run time
    assert_same(f(to_flow(x)), x * 2.0 + 1.0)
    assert f.num_traces == 1


def test_explain_contents(gen):
    f = flow.jit(chain)
    x, a, b = (to_flow(make((64,), torch.float32, gen)) for _ in range(3))
    f(x, a, b)
    text = f.explain()
    for word in ("graph", "fusion", "kernel", "relu", "sigmoid"):
        assert word in text, word
    assert len(f.explain(with_source=False)) <= len(text)
    with pytest.raises(RuntimeError, match="call the function first"):
        flow.jit(chain).explain()


def test_cuda_target_compiles_and_explains_source(gen):
    # CPU tensors with a CUDA target: compiled by NVRTC, then refused at run time with a clear error.
    f = flow.jit(chain, target="cuda")
    x, a, b = (to_flow(make((64,), torch.float32, gen)) for _ in range(3))
    with pytest.raises(ValueError, match="compiled for cuda"):
        f(x, a, b)
    assert "__global__" in f.explain()


# ---- the kernel cache across processes ----------------------------------------------------------

CACHE_SCRIPT = textwrap.dedent("""
    import json, flow
    @flow.jit
    def f(x, a, b):
        return flow.relu(x * a + b) * flow.sigmoid(x) + 1.0
    @flow.jit
    def g(x):
        return flow.softmax(x, -1), flow.log_softmax(x, -1)
    x = flow.arange(0, 96, dtype=flow.float32).reshape(8, 12) / 10
    r = f(x, x, x)
    s, l = g(x)
    e = flow.exp(x) + 2 * x
    e2 = flow.sum(e, 1)
    print(json.dumps({"stats": flow.cache_stats(), "r": r.tolist(), "s": s.tolist(), "e": e2.tolist(),
                      "compiled": f.num_compiled + g.num_compiled}))
""")


def run_cache_script(cache_dir):
    env = dict(os.environ, FLOW_CACHE_DIR=str(cache_dir), PYTHONPATH=os.path.abspath(PYTHON_DIR))
    env.pop("FLOW_DISABLE_DISK_CACHE", None)
    out = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    first = run_cache_script(tmp_path)
    assert first["stats"]["misses"] > 0 and first["stats"]["stores"] > 0, first["stats"]
    assert first["compiled"] > 0
    second = run_cache_script(tmp_path)
    assert second["stats"]["misses"] == 0, second["stats"]
    assert second["stats"]["disk_hits"] > 0, second["stats"]
    assert second["stats"]["corrupt_entries"] == 0
    assert second["compiled"] == 0
    assert second["r"] == first["r"] and second["s"] == first["s"] and second["e"] == first["e"]


# ---- eager mode: one kernel per signature, any size ---------------------------------------------

def no_kernel_lookups():
    """No kernel was compiled or even loaded from disk since the last reset_cache_stats()."""
    st = flow.cache_stats()
    return st["misses"] == 0 and st["stores"] == 0 and st["disk_hits"] == 0


def test_eager_is_shape_generic(gen):
    x = to_flow(make((10,), torch.float32, gen))
    flow.exp(x * 3.5)  # compile (or load) the signature
    flow.reset_cache_stats()
    # (a single element coalesces to rank 0, another signature, so sizes here are > 1)
    for n in (17, 1031, 4096, 2**20 + 3):
        y = to_flow(make((n,), torch.float32, gen))
        assert_same(flow.exp(y * 2.25), torch.exp(to_torch(y) * 2.25), rtol=4e-6)
    assert no_kernel_lookups(), flow.cache_stats()
    # 2-D contiguous inputs coalesce to the same 1-D signature
    z = to_flow(make((7, 9), torch.float32, gen))
    flow.exp(z * 1.5)
    assert no_kernel_lookups(), flow.cache_stats()
    # a transposed input is another stride class, which then is shape-generic too
    flow.exp(to_flow(make((7, 9), torch.float32, gen)).t() * 1.5)
    flow.reset_cache_stats()
    w = make((20, 13), torch.float32, gen)
    assert_same(flow.exp(to_flow(w).t() * 1.5), torch.exp(w.t() * 1.5), rtol=4e-6)
    assert no_kernel_lookups(), flow.cache_stats()


def test_eager_scalars_are_parameters(gen):
    x = to_flow(make((33,), torch.float32, gen))
    x * 2.0
    flow.reset_cache_stats()
    for s in (3.0, -1.5, 1e3):
        assert_same(x * s, to_torch(x) * s)
    assert no_kernel_lookups(), flow.cache_stats()


# ---- mutations: tensors outside the trace written during it ---------------------------------------


def test_mutations_of_captured_tensors_happen_on_every_call():
    count = flow.zeros((), dtype=flow.int64)
    state = flow.ones(4)

    @flow.jit
    def step(x):
        count.add_(1)
        state.mul_(0.5)
        state.add_(x)  # reads the value written just above
        return state * 2 + count  # and so do later reads

    ref_count, ref_state = 0, np.ones(4, np.float32)
    for i in range(4):
        x = flow.full((4,), float(i))
        y = step(x)
        ref_count += 1
        ref_state = ref_state * 0.5 + i
        np.testing.assert_allclose(y.numpy(), ref_state * 2 + ref_count, rtol=1e-6)
        assert count.item() == ref_count
        np.testing.assert_allclose(state.numpy(), ref_state, rtol=1e-6)
    assert step.num_traces == 1


def test_fill_and_zero_on_a_buffer_inside_a_trace_are_mutations():
    buf = flow.ones(3)

    @flow.jit
    def f(x):
        out = x + buf
        buf.zero_()
        return out

    np.testing.assert_array_equal(f(flow.ones(3)).numpy(), [2, 2, 2])
    np.testing.assert_array_equal(buf.numpy(), [0, 0, 0])
    buf.fill_(5.0)
    np.testing.assert_array_equal(f(flow.ones(3)).numpy(), [6, 6, 6])  # runs again: reads, then zeroes
    np.testing.assert_array_equal(buf.numpy(), [0, 0, 0])


def test_indexed_assignment_into_an_outside_tensor_is_refused_in_a_trace():
    buf = flow.zeros(3)

    @flow.jit
    def f(x):
        buf[0] = 1.0
        return x * 2

    with pytest.raises(flow.TraceError, match="indexed assignment"):
        f(flow.ones(3))
    np.testing.assert_array_equal(buf.numpy(), [0, 0, 0])  # nothing was written at trace time


def test_writing_a_captured_tensor_after_viewing_it_is_refused():
    buf = flow.zeros(4)

    @flow.jit
    def f(x):
        v = buf[1:3]
        buf.add_(10)
        return v * x

    with pytest.raises(flow.TraceError, match="view"):
        f(flow.ones(2))


def test_manual_seed_reseeds_compiled_dropout():
    g = flow.jit(lambda t: flow.nn.functional.dropout(t, 0.5))
    x = flow.ones(1000)
    flow.manual_seed(3)
    a = g(x).numpy()
    flow.manual_seed(3)
    np.testing.assert_array_equal(g(x).numpy(), a)


# ---- arguments written in place: written back after every run, as torch.compile does -------------

def test_arguments_written_in_place_are_written_back_on_every_call(gen):
    def fn(L, x, buf, count):
        y = x * 2  # reads x before any write
        buf.add_(x).mul_(0.5)
        count.add_(1)
        return y + buf, count

    t = torch.randn(3, 5, generator=gen)
    tb, tc = torch.randn(3, 5, generator=gen), torch.zeros((), dtype=torch.int64)
    x, b, c = to_flow(t), to_flow(tb.clone()), to_flow(tc.clone())
    f = flow.jit(lambda *a: fn(flow, *a))
    for _ in range(3):
        got, got_c = f(x, b, c)
        want, _ = fn(torch, t, tb, tc)
        assert_same(got, want)
        assert_same(b, tb)
        assert got_c is c  # the argument itself, as eager code returns it
        assert_same(c, tc)
    assert f.num_traces == 1
    assert "written in place, after every run: argument 1, argument 2 ==" in f.explain(with_source=False)


def test_an_argument_written_twice_and_read_between(gen):
    def fn(L, x):
        x.mul_(2)
        y = x + 1  # sees the first write
        x.sub_(y)
        return y

    t = torch.randn(4, 6, generator=gen)
    x = to_flow(t.clone())
    assert_same(flow.jit(lambda a: fn(flow, a))(x), fn(torch, t))
    assert_same(x, t)


def test_a_non_contiguous_argument_is_written_through_its_strides(gen):
    base_t = torch.randn(6, 4, generator=gen)
    base = to_flow(base_t.clone())
    f = flow.jit(lambda a: a.add_(10))
    f(base.t())
    base_t.t().add_(10)
    assert_same(base, base_t)


def test_functional_batch_norm_updates_running_stats_passed_as_arguments(gen):
    x = torch.randn(8, 3, 5, 5, generator=gen) * 3 + 1
    rm, rv = torch.zeros(3), torch.ones(3)
    frm, frv = to_flow(rm.clone()), to_flow(rv.clone())
    f = flow.jit(lambda a, m, v: flow.nn.functional.batch_norm(a, m, v, training=True, momentum=0.2))
    for _ in range(2):
        got = f(to_flow(x), frm, frv)
        want = torch.nn.functional.batch_norm(x, rm, rv, training=True, momentum=0.2)
        assert_same(got, want, rtol=1e-5, atol=1e-5)
        assert_same(frm, rm, rtol=1e-5, atol=1e-6)
        assert_same(frv, rv, rtol=1e-5, atol=1e-6)


def test_writing_an_argument_after_viewing_it_is_refused():
    with pytest.raises(flow.TraceError, match="views"):
        flow.jit(lambda a: (a[0], a.add_(1)))(flow.zeros(2, 3))
    with pytest.raises(flow.TraceError, match="views"):
        flow.jit(lambda a: (a.view(flow.int32), a.add_(1)))(flow.zeros(2, 3))


def test_a_written_argument_sharing_storage_with_another_is_refused():
    f = flow.jit(lambda a, b: a.add_(b))
    x = flow.ones(4)
    with pytest.raises(RuntimeError, match="argument 0 is written in place and overlaps argument 1"):
        f(x, x)
    with pytest.raises(RuntimeError, match="overlaps argument 1"):
        f(x[:2], x[1:3])
    np.testing.assert_array_equal(x.numpy(), [1, 1, 1, 1])  # nothing ran
    f(x[:2], x[2:])  # disjoint parts of one storage
    np.testing.assert_array_equal(x.numpy(), [2, 2, 1, 1])
    f(x, flow.ones(4))
    np.testing.assert_array_equal(x.numpy(), [3, 3, 2, 2])


def test_a_written_argument_overlapping_a_buffer_is_refused():
    class M(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", flow.ones(2))

        def forward(self, x):
            x.add_(1)
            return x + self.buf

    m = M()
    jm = flow.jit(m)
    np.testing.assert_array_equal(jm(flow.zeros(2)).numpy(), [2, 2])
    with pytest.raises(RuntimeError, match="argument 0 is written in place and overlaps 'buf'"):
        jm(m.buf)


def test_only_the_arguments_own_tensors_are_written_back(gen):
    """A tracer holding an argument's value (t.copy_(a), or a captured tensor's) is a tensor of its
    own: writing it writes neither."""
    g = flow.ones(3)

    def fn(a):
        t = a * 0
        t.copy_(a)
        t.add_(1)
        u = a * 0
        u.copy_(g)
        u.add_(5)
        c = a.to(a.dtype, copy=True)  # a new tensor, as torch's copy=True
        c.add_(7)
        return t, u, c

    a = flow.ones(3)
    t, u, c = flow.jit(fn)(a)
    assert a.tolist() == [1, 1, 1] and g.tolist() == [1, 1, 1]
    assert t.tolist() == [2, 2, 2] and u.tolist() == [6, 6, 6] and c.tolist() == [8, 8, 8]


def test_write_backs_read_the_values_of_the_run_not_each_other():
    class M(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", flow.ones(3))

        def forward(self, x):
            x.copy_(self.buf)
            self.buf.zero_()
            return x

    m = M()
    x = flow.full((3,), 5.0)
    flow.jit(m)(x)
    assert x.tolist() == [1, 1, 1] and m.buf.tolist() == [0, 0, 0]

    def f(a, b):
        b.copy_(a)
        a.zero_()

    a, b = flow.ones(2), flow.zeros(2)
    flow.jit(f)(a, b)
    assert a.tolist() == [0, 0] and b.tolist() == [1, 1]


@pytest.mark.gpu
@pytest.mark.skipif(not flow.cuda.is_available(), reason="needs a CUDA device")
def test_arguments_written_in_place_on_gpu(gen):
    t = torch.randn(64, 33, generator=gen)
    x = to_flow(t).cuda()
    f = flow.jit(lambda a: a.mul_(3).add_(1))
    assert f(x) is x
    assert_same(x.cpu(), t * 3 + 1)


def test_call_guard_shortcuts_match_the_general_path(gen):
    """The per-call guard's shortcuts (python/flow/_jit.py: _flatten_call for tensor-only calls,
    _C's jit_key for a tensor) give exactly the general path's structure and keys: shapes, dtypes,
    strides (size-1 dims' as -1), devices; views, expanded and size-0 tensors included."""
    from flow._jit import _flatten, _flatten_call

    base = flow.tensor(torch.randn(4, 1, 6, generator=gen).numpy())
    tensors = [base, base.transpose(0, 2), base[:, :, ::2], base.expand(4, 3, 6), flow.zeros(0, 3),
               flow.tensor(3.0), flow.ones(2, 5, dtype=flow.int64)]
    for t in tensors:
        c = t._c
        layout = tuple(-1 if n == 1 else s for n, s in zip(c.shape, c.strides))
        assert c.jit_key() == ("T", tuple(c.shape), c.dtype, layout, c.device), c
    p = flow.nn.Parameter(base)
    for args, kwargs in [(tuple(tensors), {}), ((), {}), ((base, 2.0), {}), ((base,), {"y": base}), ((p, base), {}),
                         (([base, base],), {})]:
        assert _flatten_call(args, kwargs) == _flatten((args, kwargs)), (args, kwargs)
