"""CPU kernels on the reference interpreter (jit/backend.cpp): what a build without LLVM (the GPU
machines' build) runs for the CPU work a GPU program still does, such as a model's initialization.
FLOW_CPU_BACKEND=interpreter selects the same path in a build with LLVM, so it is tested here: eager
ops over dtypes, broadcast and non-contiguous inputs, reductions, an index error, and a jitted
function, against PyTorch, in a child process (the backend is chosen once per process) with a kernel
cache of its own; the one-time warning says which path ran."""
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import flow
    import flow.nn.functional as F

    rng = np.random.default_rng(int(sys.argv[1]))
    checked = 0

    def same(got, want, rtol=1e-6, atol=1e-6, what=""):
        global checked
        g = torch.from_numpy(got.float().numpy() if got.dtype in (flow.float16, flow.bfloat16) else got.numpy())
        torch.testing.assert_close(g, want.to(g.dtype), rtol=rtol, atol=atol, equal_nan=False, msg=what)
        checked += 1

    def pair(shape, dtype=np.float32):
        a = rng.standard_normal(shape).astype(dtype)
        return flow.tensor(a), torch.from_numpy(a)

    # elementwise with broadcasting, edge sizes and a transposed (non-contiguous) operand
    for shape in [(0, 3), (1,), (7,), (37, 29)]:
        (x, tx), (b, tb) = pair(shape), pair(shape[-1:])
        same(x * 0.02 + b, tx * 0.02 + tb, what=f"mul-add {shape}")
    (x, tx) = pair((29, 37))
    (y, ty) = pair((37, 29))
    same(x.t() - y, tx.t() - ty, what="transposed operand")
    same(flow.exp(x).sum(dim=1), torch.exp(tx).sum(dim=1), rtol=1e-5, what="exp + sum(dim=1)")
    same(F.softmax(x, dim=-1), torch.softmax(tx, dim=-1), rtol=1e-5, what="softmax")
    same(F.layer_norm(x, [37]), torch.nn.functional.layer_norm(tx, [37]), rtol=1e-4, atol=1e-5, what="layer_norm")
    # integer and half dtypes
    ia = rng.integers(-50, 50, (5, 6))
    same(flow.tensor(ia) * 3 - 7, torch.from_numpy(ia) * 3 - 7, what="int64")
    (h, th) = pair((11, 13))
    same((h.half() * 2).relu(), (th.half() * 2).relu(), rtol=1e-3, atol=1e-3, what="float16")
    # an index out of range raises torch's class and message
    try:
        flow.gather(flow.tensor(ia), 1, flow.tensor(np.array([[9]] * 5)))
        raise AssertionError("gather out of range did not raise")
    except RuntimeError as e:
        assert "out of bounds" in str(e), e
    # a jitted function
    @flow.jit
    def f(a, s):
        return torch_like(a * s + 1)
    def torch_like(v):
        return flow.tanh(v) * flow.sigmoid(v)
    (a, ta) = pair((9, 6))
    for s in (0.5, 2.0):
        same(f(a, s), torch.tanh(ta * s + 1) * torch.sigmoid(ta * s + 1), rtol=1e-5, atol=1e-6, what=f"jit s={s}")
    print("checked", checked)
""")


def test_cpu_kernels_run_on_the_interpreter(tmp_path):
    env = dict(os.environ, FLOW_CPU_BACKEND="interpreter", FLOW_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.path.join(REPO, "python"))
    seed = int.from_bytes(os.urandom(4), "little")
    r = subprocess.run([sys.executable, "-c", CHILD, str(seed)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"seed {seed}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    assert "checked 12" in r.stdout, r.stdout
    warning = "FLOW_CPU_BACKEND=interpreter: CPU kernels run on the reference interpreter"
    assert r.stderr.count(warning) == 1, r.stderr[-2000:]
