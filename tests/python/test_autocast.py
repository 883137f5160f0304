"""Automatic mixed precision: ``flow.jit(fn, amp=dtype)`` against ``torch.autocast`` (dsl/autocast.h).

On the CPU the oracle is torch.autocast("cpu") itself, run on the same inputs: op by op, the same
casts must appear (output dtypes are compared exactly) and the values must agree within the
rounding of the lower type. The CUDA lists (softmax, layer_norm, exp, sum, ... in float32) are
checked on the graph a trace builds, which needs no GPU; tests/python/test_gpu.py runs them on a
device against torch.autocast("cuda").
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flow

from test_models import randomize_norms, twins

AMP = ["bfloat16", "float16"]
ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}  # relative spacing of the type's numbers near 1


def as_flow(t):
    return flow.tensor(t.numpy())


def as_torch(f):
    return torch.from_numpy(f.float().numpy())


def max_rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def block(m):
    """linear + relu, softmax, matmul, layer_norm, a sum and a scalar pow: lower-precision ops,
    ops that follow their inputs, and (on CUDA) float32-list ops."""
    def f(x, w, b, w2):
        h = m.relu(m.nn.functional.linear(x, w, b))
        s = m.softmax(h, dim=-1)
        y = m.nn.functional.layer_norm(s @ w2, (w2.shape[1],))
        return y, h.sum(dim=0), (h * 0.5) ** 2, h + x.sum()
    return f


@pytest.mark.parametrize("amp", AMP)
def test_block_matches_torch_autocast_cpu(amp):
    g = torch.Generator().manual_seed(11)
    args = [torch.randn(9, 16, generator=g), torch.randn(33, 16, generator=g), torch.randn(33, generator=g),
            torch.randn(33, 7, generator=g)]
    with torch.autocast("cpu", dtype=getattr(torch, amp)):
        expected = block(torch)(*args)
    got = flow.jit(block(flow), amp=amp)(*[as_flow(a) for a in args])
    assert len(got) == len(expected)
    for k, (gv, ev) in enumerate(zip(got, expected)):
        assert gv.dtype.name == str(ev.dtype).replace("torch.", ""), (k, gv.dtype, ev.dtype)
        # The same casts in the same places: at most one rounding step of the lower type apart (a
        # float32 sum in another order can round the other way).
        assert max_rel(as_torch(gv), ev.float()) <= ULP[amp], (k, max_rel(as_torch(gv), ev.float()))


@pytest.mark.parametrize("amp", AMP)
def test_conv_net_matches_torch_autocast_cpu(amp):
    """conv -> batch norm -> relu -> conv with bias -> residual add -> pooling -> linear, with frozen
    parameters (the folds of batch norm and pads run on the cast graph)."""
    torch.manual_seed(3)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                               torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1))
    tfc = torch.nn.Linear(8, 5)
    randomize_norms(tnet, torch.Generator().manual_seed(4))
    tnet.eval()
    fnet = flow.nn.Sequential(flow.nn.Conv2d(3, 8, 3, padding=1, bias=False), flow.nn.BatchNorm2d(8),
                              flow.nn.ReLU(), flow.nn.Conv2d(8, 8, 3, padding=1))
    ffc = flow.nn.Linear(8, 5)
    fnet.load_state_dict(tnet.state_dict())
    ffc.load_state_dict(tfc.state_dict())
    fnet.eval()

    def forward(m, net, fc):
        def f(x):
            h = net(x)
            h = m.relu(h + x.sum(dim=1, keepdim=True))
            return fc(m.flatten(m.nn.functional.adaptive_avg_pool2d(h, 1), 1))
        return f

    x = torch.randn(2, 3, 13, 11, generator=torch.Generator().manual_seed(5))
    with torch.no_grad(), torch.autocast("cpu", dtype=getattr(torch, amp)):
        expected = forward(torch, tnet, tfc)(x)
    with torch.no_grad():
        exact = forward(torch, tnet, tfc)(x)
    jf = flow.jit(forward(flow, fnet, ffc), amp=amp)
    for _ in range(2):  # the second call reuses the cached (cast, folded) parameters
        got = jf(as_flow(x))
        assert got.dtype.name == amp
        err = max_rel(as_torch(got), expected.float())
        # Within the lower type's rounding of the same computation, and no further from the float32
        # result than torch's own mixed-precision result is (times a margin).
        assert err < (2e-2 if amp == "bfloat16" else 4e-3), err
        assert max_rel(as_torch(got), exact) < 3 * max_rel(expected.float(), exact) + 1e-3
    # The convolutions and the linear themselves run in the lower type (the tolerances above would
    # also admit float32 convolutions).
    products = [ln for ln in jf.graph.to_string().split("\n") if "= conv2d(" in ln or "= linear(" in ln]
    assert len(products) == 3 and all(f"{amp}[" in ln.split("=")[0] for ln in products), products


@pytest.mark.parametrize("amp", ["bfloat16"])
def test_resnet50_autocast_cpu(amp):
    tm, fm = twins("resnet", "resnet50")
    randomize_norms(tm, torch.Generator().manual_seed(1))
    tm.eval()
    fm.load_state_dict(tm.state_dict())
    fm.eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), torch.autocast("cpu", dtype=getattr(torch, amp)):
        expected = tm(x)
    with torch.no_grad():
        exact = tm(x)
    jm = flow.jit(fm, amp=amp)
    got = jm(as_flow(x))
    assert got.dtype.name == amp and expected.dtype == getattr(torch, amp)
    convs = [ln for ln in jm._jit.graph.to_string().split("\n") if "= conv2d(" in ln]
    assert len(convs) == 53 and all(f"{amp}[" in ln.split("=")[0] for ln in convs)
    torch_err = max_rel(expected.float(), exact)
    flow_err = max_rel(as_torch(got), exact)
    print(f"\nresnet50 {amp}: rel err vs float32: torch autocast {torch_err:.2e}, flow amp {flow_err:.2e}; "
          f"flow vs torch autocast {max_rel(as_torch(got), expected.float()):.2e}")
    assert flow_err < 3 * torch_err + 1e-3


def dtypes_of_outputs(amp, device, fn, *shapes):
    """Builds the graph fn traces under an autocast policy (no compile, no device needed) and returns
    the dtypes of its outputs."""
    g = flow._C.Graph()
    g.set_autocast(amp, device)
    ids = [g.add_input(list(s), "float32", f"x{i}") for i, s in enumerate(shapes)]
    outs = fn(g, *ids)
    return [g.value_dtype(o) for o in outs]


@pytest.mark.parametrize("amp", AMP)
def test_cuda_lists_run_precision_sensitive_ops_in_float32(amp):
    def build(g, x, w):
        h = g.add_op("linear", [x, w], {})[0]
        return [h, g.add_op("softmax", [h], {"dim": -1})[0], g.add_op("exp", [h], {})[0],
                g.add_op("sum", [h], {"dims": [1]})[0], g.add_op("relu", [h], {})[0],
                g.add_op("layer_norm", [h], {"normalized_shape": [4]})[0]]

    cuda = dtypes_of_outputs(amp, "cuda", build, (3, 5), (4, 5))
    assert cuda == [amp, "float32", "float32", "float32", amp, "float32"]
    # torch's CPU lists keep softmax, exp, sum and layer_norm in the lower type.
    cpu = dtypes_of_outputs(amp, "cpu", build, (3, 5), (4, 5))
    assert cpu == [amp] * 6


def test_float64_and_integers_are_never_cast():
    def build(g, x):
        d = g.add_op("cast", [x], {"dtype": "float64"})[0]
        i = g.add_op("cast", [x], {"dtype": "int64"})[0]
        return [g.add_op("matmul", [d, d], {})[0], g.add_op("sum", [i], {"dims": [0]})[0]]

    assert dtypes_of_outputs("float16", "cuda", build, (3, 3)) == ["float64", "int64"]


def test_explain_says_which_autocast_policy_traced_the_variant():
    jf = flow.jit(lambda x, w: flow.softmax(x @ w, -1), amp="bfloat16")
    jf(flow.randn(4, 8), flow.randn(8, 3))
    assert "== autocast: bfloat16 with torch.autocast's cpu lists (4 cast nodes" in jf.explain(False)  # x, w; softmax in float32 inside
    plain = flow.jit(lambda x, w: x @ w)
    plain(flow.randn(4, 8), flow.randn(8, 3))
    assert "autocast" not in plain.explain(False)


def test_amp_argument_is_checked():
    with pytest.raises(ValueError, match="amp must be"):
        flow.jit(lambda x: x, amp="int8")
    with pytest.raises(ValueError, match="conv_search"):
        flow.jit(lambda x: x, conv_search="fastest")
    # torch and flow dtypes name the same policy.
    assert flow.jit(lambda x: x, amp=torch.bfloat16)._amp == "bfloat16"
    assert flow.jit(lambda x: x, amp=flow.float16)._amp == "float16"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_library_ops_on_the_cpu(dtype):
    """conv2d, matmul and linear take half tensors (float32 products rounded once, as torch's CPU)."""
    g = torch.Generator().manual_seed(9)
    td = getattr(torch, dtype)
    x = torch.randn(2, 4, 9, 7, generator=g).to(td)
    w = torch.randn(6, 4, 3, 3, generator=g).to(td)
    b = torch.randn(6, generator=g).to(td)
    a = torch.randn(3, 5, 17, generator=g).to(td)
    m = torch.randn(17, 4, generator=g).to(td)
    lw = torch.randn(8, 17, generator=g).to(td)

    def tf(t):
        return flow.tensor(t.float().numpy()).to(getattr(flow, dtype))

    cases = [
        (flow.nn.functional.conv2d(tf(x), tf(w), tf(b), padding=1, stride=(2, 1)), TF.conv2d(x, w, b, padding=1, stride=(2, 1))),
        (flow.matmul(tf(a), tf(m)), torch.matmul(a, m)),
        (flow.nn.functional.linear(tf(a), tf(lw)), TF.linear(a, lw)),
        (flow.matmul(tf(a).transpose(1, 2)[:, :4], tf(a)[:, :, :4]), torch.matmul(a.transpose(1, 2)[:, :4], a[:, :, :4])),
    ]
    for got, want in cases:
        assert got.dtype.name == dtype
        # One rounding of the same float32 sum: equal up to the last bit of the half type.
        rel = {"bfloat16": 8e-3, "float16": 1e-3}[dtype]
        torch.testing.assert_close(as_torch(got), want.float(), rtol=rel, atol=rel * float(want.float().abs().max()))


def test_resnet50_plans_for_cuda_under_float16_without_a_gpu():
    """The whole CUDA plan of ResNet-50 under amp="float16" is built here (NVRTC compiles every
    kernel; nothing runs): every convolution is one cuDNN call on NHWC values with its batch norm
    folded and its relu / residual add fused, and the classifier one cuBLASLt call."""
    from flow._jit import _flatten

    _, fm = twins("resnet", "resnet50")
    fm.eval()
    jm = flow.jit(fm, amp="float16", target="cuda")
    flat, spec = _flatten(((flow.randn(2, 3, 64, 64),), {}))
    exe = jm._jit._trace_and_compile(flat, spec).exe
    text = exe.explain(False)
    assert exe.num_library_calls == 54, text  # 53 convolutions + the final linear
    assert exe.num_folded == 53 and exe.num_channels_last == 53, text
    lines = [ln for ln in text.split("\n") if "library call:" in ln]
    assert sum("conv2d (cuDNN)" in ln for ln in lines) == 53
    assert sum("linear (cuBLASLt)" in ln for ln in lines) == 1
    assert sum("post-ops [add, relu]" in ln for ln in lines) == 16  # one residual add per bottleneck
    assert sum("post-ops [relu]" in ln for ln in lines) == 33


# ---- flow.autocast: the context manager ----------------------------------------------------------


def block_args(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(9, 16, generator=g), torch.randn(33, 16, generator=g), torch.randn(33, generator=g),
            torch.randn(33, 7, generator=g)]


def assert_like_torch(got, expected, amp):
    for k, (gv, ev) in enumerate(zip(got, expected)):
        assert gv.dtype.name == str(ev.dtype).replace("torch.", ""), (k, gv.dtype, ev.dtype)
        assert max_rel(as_torch(gv), ev.float()) <= ULP[amp], (k, max_rel(as_torch(gv), ev.float()))


@pytest.mark.parametrize("amp", AMP)
def test_eager_ops_inside_flow_autocast_match_torch_autocast(amp):
    args = block_args(21)
    with torch.autocast("cpu", dtype=getattr(torch, amp)):
        expected = block(torch)(*args)
    with flow.autocast("cpu", dtype=getattr(flow, amp)):
        assert flow.is_autocast_enabled("cpu") and flow.get_autocast_dtype("cpu") is getattr(flow, amp)
        got = block(flow)(*[as_flow(a) for a in args])
    assert not flow.is_autocast_enabled("cpu")
    assert_like_torch(got, expected, amp)
    # Outside the block: float32 again.
    assert block(flow)(*[as_flow(a) for a in args])[0].dtype == flow.float32


def test_jitted_function_called_under_autocast_is_its_own_variant():
    args = block_args(22)
    jf = flow.jit(block(flow))
    fargs = [as_flow(a) for a in args]
    plain = jf(*fargs)
    with flow.autocast("cpu"):  # bfloat16, torch's CPU default
        mixed = jf(*fargs)
    again = jf(*fargs)
    assert plain[0].dtype == flow.float32 and again[0].dtype == flow.float32
    with torch.autocast("cpu"):
        expected = block(torch)(*args)
    assert_like_torch(mixed, expected, "bfloat16")
    assert jf.num_traces == 2 and jf.num_variants == 2


def test_autocast_blocks_inside_a_jitted_function():
    def f(m, x, w):
        with m.autocast("cpu", dtype=m.float16):
            h = x @ w  # float16
            with m.autocast("cpu", enabled=False):
                k = x @ w  # float32: autocast off inside
        return h, k, h.float() @ w  # after the block: float32 again

    g = torch.Generator().manual_seed(23)
    x, w = torch.randn(5, 8, generator=g), torch.randn(8, 8, generator=g)
    expected = f(torch, x, w)
    got = flow.jit(lambda x, w: f(flow, x, w))(as_flow(x), as_flow(w))
    assert [t.dtype.name for t in got] == [str(t.dtype).replace("torch.", "") for t in expected]
    for gv, ev in zip(got, expected):
        assert max_rel(as_torch(gv), ev.float()) <= ULP["float16"]


def test_autocast_as_a_decorator_and_bad_arguments():
    @flow.autocast("cpu", dtype=flow.bfloat16)
    def mm(a, b):
        return a @ b

    assert mm(flow.randn(3, 4), flow.randn(4, 2)).dtype == flow.bfloat16
    with pytest.raises(ValueError, match="device_type"):
        flow.autocast("tpu")
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flow.autocast("cpu", dtype=flow.float64)


def test_saved_model_keeps_its_mixed_precision_variants(tmp_path):
    """flow.save writes the traced graph with its casts; flow.load runs it as traced, and prefers
    the variant traced under the flow.autocast policy active at the call."""
    args = [as_flow(a) for a in block_args(24)]
    jf = flow.jit(block(flow))
    plain = jf(*args)
    with flow.autocast("cpu"):
        mixed = jf(*args)
    flow.save(jf, tmp_path / "bundle")
    m = flow.load(tmp_path / "bundle")
    got_plain = m(*args)
    with flow.autocast("cpu"):
        got_mixed = m(*args)
    for a, b in zip(got_plain, plain):
        assert a.dtype == flow.float32 and torch.equal(as_torch(a), as_torch(b))
    for a, b in zip(got_mixed, mixed):
        assert a.dtype == b.dtype and torch.equal(as_torch(a), as_torch(b))
    assert mixed[0].dtype == flow.bfloat16


def _cpu_has_avx512_core():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))


@pytest.mark.skipif(not _cpu_has_avx512_core(), reason="oneDNN's bf16 primitives need AVX-512 (avx512_core)")
def test_bfloat16_convolutions_run_in_onednn_with_cached_packed_weights():
    """On an AVX-512 CPU the bf16 convolutions of an amp="bfloat16" model are oneDNN bf16 primitives
    (AMX where present), not float32 products of converted copies: their frozen weights are packed
    once and found in oneDNN's weight cache on later calls (the float32 fallback converts the
    weights every call and caches nothing)."""
    torch.manual_seed(4)
    tnet = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3))
    fnet = flow.nn.Sequential(flow.nn.Conv2d(16, 32, 3, padding=1), flow.nn.ReLU(), flow.nn.Conv2d(32, 32, 3))
    fnet.load_state_dict(tnet.state_dict())
    x = torch.randn(2, 16, 20, 20)
    jf = flow.jit(fnet, amp="bfloat16")
    jf(as_flow(x))
    s0 = flow._C.onednn_stats()
    got = jf(as_flow(x))
    s1 = flow._C.onednn_stats()
    assert s1["weight_cache_hits"] >= s0["weight_cache_hits"] + 2, (s0, s1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = tnet(x)
    assert got.dtype == flow.bfloat16
    assert max_rel(as_torch(got), expected.float()) < 2 * ULP["bfloat16"]


# ---- torch functions flow writes in Python, and the corner cases of the policy ----------------------

PY_FUNCS = {
    "mm": (lambda m, a, b, v, M, i, t: m.mm(a, b)),
    "bmm": (lambda m, a, b, v, M, i, t: m.bmm(M, M)),
    "addmm": (lambda m, a, b, v, M, i, t: m.addmm(a, a, b)),
    "baddbmm": (lambda m, a, b, v, M, i, t: m.baddbmm(M, M, M)),
    "mv": (lambda m, a, b, v, M, i, t: m.mv(a, v)),
    "addmv": (lambda m, a, b, v, M, i, t: m.addmv(v, a, v)),
    "dot": (lambda m, a, b, v, M, i, t: m.dot(v, v)),
    "mse_loss": (lambda m, a, b, v, M, i, t: m.nn.functional.mse_loss(a.to(m.bfloat16), b.to(m.bfloat16))),
    "l1_loss": (lambda m, a, b, v, M, i, t: m.nn.functional.l1_loss(a.to(m.bfloat16), b.to(m.bfloat16))),
    "nll_loss": (lambda m, a, b, v, M, i, t: m.nn.functional.nll_loss(a.to(m.bfloat16), t)),
    "cross_entropy": (lambda m, a, b, v, M, i, t: m.nn.functional.cross_entropy(a.to(m.bfloat16), t)),
    "pad reflect": (lambda m, a, b, v, M, i, t: m.nn.functional.pad(i.to(m.bfloat16), (1, 1, 1, 1), mode="reflect")),
    "pad replicate": (lambda m, a, b, v, M, i, t: m.nn.functional.pad(i.to(m.bfloat16), (1, 1, 1, 1), mode="replicate")),
    "pad circular": (lambda m, a, b, v, M, i, t: m.nn.functional.pad(i.to(m.bfloat16), (1, 1, 1, 1), mode="circular")),
    "avg_pool2d": (lambda m, a, b, v, M, i, t: m.nn.functional.avg_pool2d(i.to(m.bfloat16), 3, padding=1)),
}


def py_func_args(m, seed):
    g = torch.Generator().manual_seed(seed)
    ts = [torch.randn(6, 6, generator=g), torch.randn(6, 6, generator=g), torch.randn(6, generator=g),
          torch.randn(2, 6, 6, generator=g), torch.randn(1, 2, 5, 5, generator=g)]
    tgt = torch.tensor([0, 3, 5, 1, 2, 4])
    if m is torch:
        return ts + [tgt]
    return [as_flow(x) for x in ts] + [flow.tensor(tgt.numpy())]


@pytest.mark.parametrize("name", list(PY_FUNCS))
def test_torch_functions_written_in_python_take_their_own_autocast_class(name):
    """addmm is lower precision as a whole (not matmul + a float32 add), mv and dot are not on the
    CPU list although they are matrix products, the losses and reflect/replicate pads run in float32,
    avg_pool2d keeps its type: as torch.autocast("cpu") gives, eagerly and under @flow.jit."""
    fn = PY_FUNCS[name]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = fn(torch, *py_func_args(torch, 31))
    fargs = py_func_args(flow, 31)
    with flow.autocast("cpu", dtype=flow.bfloat16):
        eager = fn(flow, *fargs)
    jitted = flow.jit(lambda *a: fn(flow, *a), amp="bfloat16")(*fargs)
    wname = str(want.dtype).replace("torch.", "")
    assert eager.dtype.name == wname and jitted.dtype.name == wname, (name, eager.dtype, jitted.dtype, wname)
    tol = 4 * ULP["bfloat16"]
    assert max_rel(as_torch(eager), want.float()) <= tol and max_rel(as_torch(jitted), want.float()) <= tol


def cuda_output_dtypes(fn, *args, amp="float16"):
    """The output dtypes of `fn` traced for CUDA under amp (NVRTC compiles it; nothing runs)."""
    from flow._jit import _flatten

    jf = flow.jit(fn, amp=amp, target="cuda")
    flat, spec = _flatten((args, {}))
    g = jf._trace_and_compile(flat, spec).graph
    return [g.value_dtype(o) for o in g.outputs]


def test_cuda_classes_of_python_functions():
    a, b, v, M, i, t = py_func_args(flow, 32)
    dt = cuda_output_dtypes(lambda a, b, v, M, i: (flow.addmm(a, a, b), flow.mv(a, v), flow.dot(v, v.to(flow.bfloat16)),
                                                   flow.nn.functional.mse_loss(a.half(), b.half()),
                                                   flow.nn.functional.avg_pool2d(i.half(), 3, padding=1),
                                                   flow.nn.functional.pad(i.half(), (1, 1, 1, 1), mode="reflect")),
                            a, b, v, M, i)
    # addmm and mv lower, dot promotes float32 with bfloat16 to float32, mse_loss in float32,
    # avg_pool2d keeps half (its sum inside is not a user's sum), a reflect pad is not on CUDA's list.
    assert dt == ["float16", "float16", "float32", "float32", "float16", "float16"], dt


def test_flow_autocast_block_in_a_function_compiled_for_cuda():
    def f(x, w):
        with flow.autocast("cuda"):
            return x @ w

    x, w = flow.randn(4, 8), flow.randn(8, 3)
    assert cuda_output_dtypes(f, x, w, amp=None) == ["float16"]


def test_nested_jitted_function_keeps_its_amp():
    inner = flow.jit(lambda x, w: x @ w, amp="bfloat16")
    outer = flow.jit(lambda x, w: inner(x, w) + 0)
    x, w = flow.randn(4, 8), flow.randn(8, 3)
    assert inner(x, w).dtype == flow.bfloat16
    assert outer(x, w).dtype == flow.bfloat16


def test_a_failed_op_under_autocast_leaves_no_casts_behind():
    def f(x, w):
        try:
            return x @ w  # shapes do not match
        except RuntimeError:
            return x.sum()

    jf = flow.jit(f, amp="bfloat16")
    out = jf(flow.randn(4, 8), flow.randn(5, 3))
    assert out.dtype == flow.float32
    assert "cast" not in jf.graph.to_string(), jf.graph.to_string()
    assert jf.num_kernels == 1


def test_one_cast_per_value_feeds_every_product():
    jf = flow.jit(lambda x, a, b, c: (x @ a, x @ b, x @ c), amp="bfloat16")
    jf(*[flow.randn(4, 4) for _ in range(4)])
    casts = [ln for ln in jf.graph.to_string().split("\n") if "= cast(%0)" in ln]
    assert len(casts) == 1, jf.graph.to_string()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_empty_reduction_with_a_bias_is_the_bias(dtype):
    """linear with K = 0: the output is the bias (the output memory is uninitialized: a NaN there
    must not survive), and afterwards other half products still use oneDNN's own primitives."""
    d = getattr(flow, dtype)
    b = flow.randn(5).to(d)
    for _ in range(20):
        y = flow.nn.functional.linear(flow.zeros(3, 0).to(d), flow.zeros(5, 0).to(d), b)
        assert y.dtype == d
        np.testing.assert_array_equal(y.float().numpy(), np.broadcast_to(b.float().numpy(), (3, 5)))


def test_bundle_prefers_the_mode_then_the_autocast_policy(tmp_path):
    torch.manual_seed(6)
    m = flow.nn.Sequential(flow.nn.Linear(4, 4), flow.nn.BatchNorm1d(4))
    jm = flow.jit(m)
    x = flow.randn(8, 4)
    m.train()
    jm(x)
    m.eval()
    with flow.autocast("cpu"):
        jm(x)
    flow.save(jm, tmp_path / "b")
    loaded = flow.load(tmp_path / "b")
    loaded.eval()
    before = {k: v.numpy().copy() for k, v in loaded.weights.items()}
    out = loaded(x)  # eval, outside autocast: the eval variant (traced under autocast), not the train one
    assert out.dtype == flow.bfloat16
    for k, v in loaded.weights.items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)  # no running-statistics update


def test_eager_autocast_casts_a_parameter_once_per_context():
    """Inside one flow.autocast a parameter's cast is reused (torch caches it too) until the parameter
    is written; leaving autocast drops the cache."""
    lin = flow.nn.Linear(8, 4)
    x = flow.randn(3, 8)
    from flow import amp

    with flow.autocast("cpu"):
        first = amp.cast_args("linear", [x, lin.weight])
        again = amp.cast_args("linear", [x, lin.weight])
        assert again[1] is first[1] and first[1].dtype == flow.bfloat16
        assert again[0] is not first[0]  # an activation is cast every time
        with flow.no_grad():
            lin.weight.mul_(2.0)  # a write: the next cast sees it
        third = amp.cast_args("linear", [x, lin.weight])
        assert third[1] is not first[1]
        np.testing.assert_allclose(third[1].float().numpy(), 2 * first[1].float().numpy())
        y = lin(x)
    assert y.dtype == flow.bfloat16
    assert not amp._cast_cache()
