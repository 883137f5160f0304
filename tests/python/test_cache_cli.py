"""python -m flow.cache: info, list, prune (least recently used first), clear, bad sizes; and a
size-capped cache shared by several processes compiling at once."""
import json
import os
import subprocess
import sys
import textwrap

import flow

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = os.path.join(REPO, "python")

FILL_SCRIPT = textwrap.dedent("""
    import json, sys, flow
    k = int(sys.argv[1])
    outs = []
    for n in range(k, k + {count}):
        @flow.jit
        def f(x):
            return flow.tanh(x * (n + 1)) + flow.exp(-x) * n   # n is a trace-time constant: new kernel each
        x = flow.arange(0, 50, dtype=flow.float32) / 50
        y = f(x)
        ref = [__import__("math").tanh(v * (n + 1)) + __import__("math").exp(-v) * n for v in x.tolist()]
        outs.append(max(abs(a - b) for a, b in zip(y.tolist(), ref)))
    print(json.dumps({{"err": max(outs), "stats": flow.cache_stats()}}))
""")


def env_for(cache, **extra):
    env = dict(os.environ, FLOW_CACHE_DIR=str(cache), PYTHONPATH=PYTHON_DIR, **extra)
    env.pop("FLOW_DISABLE_DISK_CACHE", None)
    env.pop("FLOW_CACHE_MAX_SIZE", None) if "FLOW_CACHE_MAX_SIZE" not in extra else None
    return env


def fill(cache, start=0, count=6, **extra):
    r = subprocess.run([sys.executable, "-c", FILL_SCRIPT.format(count=count), str(start)], env=env_for(cache, **extra),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def cli(cache, *args):
    return subprocess.run([sys.executable, "-m", "flow.cache", *args], env=env_for(cache), capture_output=True,
                          text=True, timeout=120)


def test_info_list_prune_clear(tmp_path):
    cache = tmp_path / "kernels"
    n = fill(cache, 0, 6)["stats"]["stores"]  # 6 jitted kernels and the eager ops' kernels
    assert n >= 6
    r = cli(cache, "info")
    assert r.returncode == 0, r.stderr
    assert f"directory: {cache}" in r.stdout and f"entries:   {n}\n" in r.stdout
    r = cli(cache, "list")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("flow_pointwise") == n and f"{n} entries" in r.stdout and "cpu_tile" in r.stdout
    import flow.cache as fc

    entries = fc.entries(str(cache))
    assert len(entries) == n and all(e["ok"] for e in entries)
    sizes = [e["bytes"] for e in entries]
    # Touch the oldest (a hit refreshes it): prune must then keep it and evict the next oldest.
    oldest = entries[0]["path"]
    os.utime(oldest, None)
    limit = sum(sizes) // 2
    r = cli(cache, "prune", "--max-size", str(limit))
    assert r.returncode == 0, r.stderr
    left = fc.entries(str(cache))
    assert sum(e["bytes"] for e in left) <= limit
    assert oldest in [e["path"] for e in left]
    assert entries[1]["path"] not in [e["path"] for e in left]
    r = cli(cache, "clear")
    assert r.returncode == 0 and "removed" in r.stdout
    assert fc.entries(str(cache)) == []


def test_bad_arguments(tmp_path):
    r = cli(tmp_path, "prune", "--max-size", "lots")
    assert r.returncode == 2 and "not a size: 'lots'" in r.stderr
    r = cli(tmp_path, "frobnicate")
    assert r.returncode == 2
    env = env_for(tmp_path)
    env["FLOW_CACHE_DIR"] = ""
    r = subprocess.run([sys.executable, "-m", "flow.cache", "info"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "memory-only" in r.stderr


def test_size_cap_with_concurrent_processes(tmp_path):
    cache = tmp_path / "kernels"
    # One entry is ~10-20 KB; a cap of 60K holds a few. Four processes compile 6 kernels each at once.
    procs = [subprocess.Popen([sys.executable, "-c", FILL_SCRIPT.format(count=6), str(10 * i)],
                              env=env_for(cache, FLOW_CACHE_MAX_SIZE="60K"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    for r in results:
        assert r["err"] < 1e-5  # every process computed right while others evicted its entries
        assert r["stats"]["corrupt_entries"] == 0
    assert sum(r["stats"]["evicted"] for r in results) > 0
    import flow.cache as fc

    # Each process may overshoot by about a tenth of the cap (plus the entry it stored) before it
    # looks at the directory again (KernelCache::enforce_cap).
    biggest = max(e["bytes"] for e in fc.entries(str(cache), describe=False))
    assert sum(e["bytes"] for e in fc.entries(str(cache), describe=False)) <= 60 * 1024 + 4 * (6 * 1024 + biggest)
    assert all(e["ok"] for e in fc.entries(str(cache)))
