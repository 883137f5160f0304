"""Each of flow's dtype refusals against torch on the CPU, for every dtype both have: prints any op
where one raises and the other computes (a review aid, not a test).

    PYTHONPATH=python:tests/python .venv/bin/python tools/verify_refusals.py
"""
import torch, flow, warnings
warnings.simplefilter("ignore")
from conftest import FLOW_OF, make
g = torch.Generator().manual_seed(0)
DT = list(FLOW_OF)
def outcome(fn):
    try:
        fn(); return "ok"
    except Exception as e:
        return type(e).__name__ + ": " + str(e).split("\n")[0][:70]
cases = {
  "median dim": lambda L, x: L.median(x, 0),
  "median all": lambda L, x: L.median(x),
  "nanmedian dim": lambda L, x: L.nanmedian(x, 0),
  "kthvalue": lambda L, x: L.kthvalue(x, 2, 0),
  "logcumsumexp": lambda L, x: L.logcumsumexp(x, 0),
  "cross": lambda L, x: L.linalg.cross(x, x, dim=0),
  "matrix_power": lambda L, x: L.linalg.matrix_power(x, 2),
  "mm": lambda L, x: L.mm(x, x),
  "frac": lambda L, x: L.frac(x),
  "lerp": lambda L, x: L.lerp(x, x, 0.5),
  "cdist": lambda L, x: L.cdist(x, x),
  "pdist": lambda L, x: (L.nn.functional.pdist if L is torch else L.pdist)(x),
  "hypot": lambda L, x: L.hypot(x, x),
  "bitwise_and": lambda L, x: L.bitwise_and(x, x),
  "lshift": lambda L, x: L.bitwise_left_shift(x, x),
  "uniform_": lambda L, x: x.clone().uniform_(),
  "normal_": lambda L, x: x.clone().normal_(),
  "exponential_": lambda L, x: x.clone().exponential_(),
}
tri = {"tril_indices": lambda L, d: L.tril_indices(3, 3, dtype=d), "triu_indices": lambda L, d: L.triu_indices(3, 3, dtype=d)}
bad = 0
for name, fn in cases.items():
    for td in DT:
        t = make((3, 3), td, g, low=0, high=5)
        a, b = outcome(lambda: fn(torch, t)), outcome(lambda: fn(flow, flow.as_tensor(t)))
        if (a == "ok") != (b == "ok"):
            bad += 1; print(f"MISMATCH {name} {td}: torch {a} | flow {b}")
for name, fn in tri.items():
    for td in DT:
        a, b = outcome(lambda: fn(torch, td)), outcome(lambda: fn(flow, FLOW_OF[td]))
        if (a == "ok") != (b == "ok"):
            bad += 1; print(f"MISMATCH {name} {td}: torch {a} | flow {b}")
print("mismatches:", bad)
