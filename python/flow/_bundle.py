"""flow.save / flow.load: a compiled model as a directory that starts with zero compilations.

Layout of a bundle (format ``flow.bundle/1``)::

    manifest.json        format, flow version, codegen hash, target id, device, variants
    weights.safetensors  the module's parameters and buffers, and any captured tensors
    graphs/<i>.graph     each compiled variant's graph (dsl::Graph::serialize bytes)
    tuning/records.jsonl the tuning records of the model's kernels for the saving target
    kernels/             the kernel-cache entries the model uses (the cache's own file layout)

Note: a bundle stores *graphs*, not Python: ``flow.load`` needs neither the model's class nor its
source. Each variant (one per input signature the model was called with before saving) keeps how
its graph inputs bind: to a call argument, to a named weight. ``flow.load`` puts ``kernels/`` in
front of the user's kernel cache as a read-only layer and compiles every variant from its graph
with the bundle's records; on the target it was saved on, every kernel is then a cache hit (zero
compilations, visible in ``flow.cache_stats()``), and on another target the same steps compile
fresh kernels (records are per target, so the other target's tuning is not applied to it).
"""
import json
import os
import shutil
import tempfile

from . import _C
from . import amp as _amp
from ._epoch import structure_changed
from ._jit import (JitFunction, JitModule, _flatten, _layout_key, _module_tensors, arg_slots, build_outputs,
                   run_executable)
from ._profile import check_repeats, profile_executable
from ._safetensors import load_file, save_file
from ._tensor import Tensor
from .nn._module_store import ModuleStore

__all__ = ["save", "load", "LoadedModel", "BUNDLE_FORMAT"]

BUNDLE_FORMAT = "flow.bundle/1"


def is_compiled_model(obj):
    """Whether ``obj`` is a function or model compiled with flow.jit (what a bundle holds)."""
    return (isinstance(obj, (JitFunction, JitModule))
            or isinstance(getattr(obj, "__dict__", {}).get("_flow_jit_fn"), JitFunction))


def _jit_function(compiled):
    if isinstance(compiled, JitFunction):
        return compiled
    if isinstance(compiled, JitModule):
        return object.__getattribute__(compiled, "_jit")
    j = getattr(compiled, "__dict__", {}).get("_flow_jit_fn")
    if isinstance(j, JitFunction):
        return j
    raise TypeError(f"flow.save(obj, path) writes a model compiled with flow.jit (called at least once) as a "
                    f"bundle directory; got {type(compiled).__name__}")


def _json_value(x, what):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise NotImplementedError(f"flow.save: cannot store {what} of type {type(x).__name__} in a bundle")


def _spec_to_json(spec):
    if spec in ("T", "V"):
        return spec
    if spec[0] in ("tuple", "list"):
        return {spec[0]: [_spec_to_json(s) for s in spec[1]]}
    if spec[0] == "dict":
        return {"dict": [[_json_value(k, "a dict key"), _spec_to_json(s)] for k, s in zip(spec[1], spec[2])]}
    raise NotImplementedError(f"flow.save: cannot store a {spec[0].__name__} structure in a bundle")


def _spec_from_json(j):
    if j in ("T", "V"):
        return j
    (kind, body), = j.items()
    if kind in ("tuple", "list"):
        return (kind, tuple(_spec_from_json(s) for s in body))
    return ("dict", tuple(k for k, _ in body), tuple(_spec_from_json(s) for _, s in body))


def _call_leaf_json(k):
    """A guard-key leaf (jit._leaf_key) as JSON."""
    if k[0] == "T":
        return {"kind": "T", "shape": list(k[1]), "dtype": k[2], "layout": list(k[3]), "device": k[4]}
    if k[0] == "V":
        return {"kind": "V", "value": _json_value(k[2], "a non-tensor argument")}
    raise NotImplementedError(f"flow.save: cannot store an argument of type {k[1].__name__} in a bundle")


def save(compiled, path):
    """Writes a compiled model (``flow.jit(model)``, called at least once) to the directory ``path``
    (created, or replaced if it is a bundle already): every compiled variant's graph, the weights,
    the tuning records and kernel-cache entries it uses. Returns ``path``."""
    jf = _jit_function(compiled)
    variants = [(key, v) for key, v in jf._variants.items() if v.exe is not None]
    if not variants:
        raise RuntimeError("flow.save: the model has not been compiled yet; call it once with example inputs first")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.exists(os.path.join(path, "manifest.json")) and os.listdir(path):
        raise FileExistsError(f"flow.save: {path} exists and is not a flow bundle; refusing to overwrite it")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".flow-bundle-", dir=parent)
    try:
        weights = {}
        module_state = _module_tensors(jf._module)
        captures = {}
        devices = set()
        manifest_variants, kernel_keys, records = [], [], []
        db = jf._database()
        os.makedirs(os.path.join(tmp, "graphs"))
        for i, (key, v) in enumerate(variants):
            _, leaf_keys, training, amp_key = key
            exe = v.exe
            state = _module_tensors(jf._module) if v.uses_module else {}
            bindings, strides = [], []
            for b, (kind, x) in enumerate(v.bindings):
                if kind == "arg":
                    bindings.append(["arg", x])
                    strides.append(list(exe.input_strides[b]))
                    continue
                t = v._resolve(kind, x, None, state)
                if kind == "module":
                    name = x
                else:
                    name = captures.setdefault(id(x), f"__capture__.{len(captures)}")
                weights[name] = t
                devices.add(t._c.device)
                bindings.append(["weight", name])
                strides.append([])  # weights are stored contiguous
            mutations = []
            for (kind, x), k in v.mutations:
                t = v._resolve(kind, x, None, state)
                name = x if kind == "module" else captures.setdefault(id(x), f"__capture__.{len(captures)}")
                weights[name] = t
                mutations.append([name, k])
            out_leaves = []
            for kind, x in v.out_leaves:
                out_leaves.append([kind, _json_value(x, "a returned constant") if kind == "const" else x])
            with open(os.path.join(tmp, "graphs", f"{i}.graph"), "wb") as f:
                f.write(v.graph.to_bytes())
            call_flat_spec = key[0]
            manifest_variants.append({
                "graph": f"graphs/{i}.graph",
                "call_spec": _spec_to_json(call_flat_spec),
                "call_leaves": [_call_leaf_json(k) for k in leaf_keys],
                "training": training,
                # The flow.autocast dtype active when it was traced, or None (its graph holds the casts).
                "autocast": amp_key,
                "bindings": bindings,
                "input_strides": strides,
                "out_spec": _spec_to_json(v.out_spec),
                "out_leaves": out_leaves,
                "mutations": mutations,
                "target": exe.target_id,
            })
            kernel_keys += [k["key"] for k in exe.kernels()]
            if db is not None:
                for w in exe.workloads() + [c["workload"] for c in exe.library_calls() if c["workload"]]:
                    r = db.best(w, exe.target_id)
                    if r is not None:
                        records.append(r)
            for k in leaf_keys:
                if k[0] == "T":
                    devices.add(k[4])
        for name, t in module_state.items():
            weights.setdefault(name, t)
        device = "cuda" if "cuda" in devices else "cpu"
        save_file({n: (t.cpu() if t._c.device != "cpu" else t) for n, t in weights.items()},
                  os.path.join(tmp, "weights.safetensors"), metadata={"format": BUNDLE_FORMAT})
        os.makedirs(os.path.join(tmp, "tuning"))
        with open(os.path.join(tmp, "tuning", "records.jsonl"), "w") as f:
            for r in dict.fromkeys(records):
                f.write(r + "\n")
        kernel_keys = list(dict.fromkeys(kernel_keys))
        exported = _C.cache_export(kernel_keys, os.path.join(tmp, "kernels"))
        from . import __version__
        manifest = {
            "format": BUNDLE_FORMAT,
            "flow_version": __version__,
            "target": manifest_variants[0]["target"],
            "device": device,
            "module": type(jf._module).__qualname__ if jf._module is not None else getattr(jf._fn, "__qualname__", ""),
            "fuse": bool(jf._fuse),
            "kernels": len(kernel_keys),
            "kernels_exported": exported,
            "variants": manifest_variants,
        }
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


class _LoadedVariant:
    def __init__(self, spec, leaves, training, exe, bindings, out_spec, out_leaves, mutations):
        self.spec, self.leaves, self.training = spec, leaves, training
        self.autocast = None  # the flow.autocast dtype it was traced under, or None
        self.exe, self.bindings = exe, bindings
        self.out_spec, self.out_leaves = out_spec, out_leaves
        self.mutations = mutations  # [(weight name, output index)]: written back after each run
        self._arg_slots = arg_slots(bindings)
        self._template = None  # flow._jit.run_executable

    def matches(self, spec, flat, device):
        if spec != self.spec or len(flat) != len(self.leaves):
            return False
        for saved, x in zip(self.leaves, flat):
            if saved["kind"] == "T":
                if not (isinstance(x, Tensor) and x._c is not None and list(x._c.shape) == list(saved["shape"])
                        and x._c.dtype == saved["dtype"] and list(_layout_key(x._c)) == list(saved["layout"])
                        and x._c.device == device):
                    return False
            elif isinstance(x, Tensor) or type(x) is not type(saved["value"]) or x != saved["value"]:
                return False
        return True


class LoadedModel:
    """A model loaded by ``flow.load``: call it like the compiled original (with one of the input
    signatures it was saved with). ``num_compiled`` counts the kernels compiled while loading
    (0 when the bundle's kernels fit this machine), ``weights`` maps names to tensors."""

    def __init__(self, path, manifest, weights, variants, num_compiled, num_kernels, target_matches, device="cpu"):
        self.path = path
        self.device = device  # where inputs must live (the bundle's device, or load(target=...))
        self.manifest = manifest
        self.weights = weights  # a ModuleStore (the property below)
        self._variants = variants
        self.num_compiled = num_compiled
        self.num_kernels = num_kernels
        self.target_matches = target_matches
        self.training = False

    @property
    def weights(self):
        """name -> tensor; assigning an entry (or the whole dict) binds the new tensor at the next call.
        An assigned dict is copied: later changes to the dict passed in are not seen."""
        return self._weights

    @weights.setter
    def weights(self, value):
        self._weights = ModuleStore(value)
        structure_changed()  # the variants' input templates hold the old weights (an empty dict sets nothing)

    def __call__(self, *args, **kwargs):
        flat, spec = _flatten((args, kwargs))
        v = self._select(flat, spec)
        outs = run_executable(v, flat, lambda: self._inputs(v, flat))
        for name, k in v.mutations:
            self.weights[name].copy_(Tensor._wrap(outs[k]))

        def input_of(b):
            kind, x = v.bindings[b]
            return flat[x] if kind == "arg" else self.weights[x]

        return build_outputs(v.out_spec, v.out_leaves, outs, input_of)

    def profile(self, *args, repeats: int = 10, **kwargs):
        """Times every kernel and library call of the variant these arguments select (a ``flow.Profile``)."""
        check_repeats(repeats, "flow.LoadedModel")
        flat, spec = _flatten((args, kwargs))
        v = self._select(flat, spec)
        return profile_executable(v.exe, self._inputs(v, flat), repeats)

    def _inputs(self, v, flat):
        """The graph inputs of a call of variant `v` (flow._C tensors), in graph-input order."""
        return [(flat[x] if kind == "arg" else self.weights[x])._c for kind, x in v.bindings]

    def _select(self, flat, spec):
        # A variant of the current mode (train()/eval()) first, else any that takes these arguments;
        # among those, one traced under the flow.autocast policies active now first.
        amp_now = _amp._state().get("cuda" if str(self.device).startswith("cuda") else "cpu")
        candidates = [v for v in self._variants if v.training in (None, self.training)]
        candidates += [v for v in self._variants if v not in candidates]
        # The mode first, then the policy (stable: declaration order otherwise).
        candidates.sort(key=lambda v: (v.training not in (None, self.training), v.autocast != amp_now))
        for v in candidates:
            if v.matches(spec, flat, self.device):
                break
        else:
            sigs = "; ".join(", ".join(f"{l['dtype']}{l['shape']}" if l["kind"] == "T" else repr(l["value"])
                                       for l in v.leaves) for v in self._variants)
            raise ValueError(f"flow.load: no saved variant of {self.manifest.get('module', 'the model')} takes "
                             f"these arguments; the bundle has: {sigs}")
        return v

    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        return {k: v for k, v in self.weights.items() if not k.startswith("__capture__.")}

    def explain(self, with_source=False):
        return "\n".join(v.exe.explain(with_source) for v in self._variants)

    def __repr__(self):
        return (f"flow.LoadedModel({self.path!r}, {len(self._variants)} variant(s), {self.num_kernels} kernels, "
                f"{self.num_compiled} compiled at load)")


def load(path, *, target=None):
    """Loads a bundle written by ``flow.save``. On the target it was saved for, nothing compiles; on
    another (a different CPU, or ``target`` differs), kernels are compiled from the saved graphs.
    Raises FileNotFoundError for a directory that is not a bundle and RuntimeError for a bundle of
    another format."""
    path = os.fspath(path)
    mpath = os.path.join(path, "manifest.json")
    if not os.path.isfile(mpath):
        raise FileNotFoundError(f"flow.load: {path} is not a flow bundle (no manifest.json)")
    try:
        with open(mpath) as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise RuntimeError(f"flow.load: {mpath} is unreadable: {e}") from None
    fmt = manifest.get("format") if isinstance(manifest, dict) else None
    if fmt != BUNDLE_FORMAT:
        raise RuntimeError(f"flow.load: {path} is a bundle of format {fmt!r}, but this flow reads {BUNDLE_FORMAT!r}; "
                           "save the model again with this version of flow")
    device = target or manifest.get("device", "cpu")
    if device == "cuda" and not _C.cuda_is_available():
        raise RuntimeError(f"flow.load: the bundle is for CUDA but CUDA is not available: "
                           f"{_C.cuda_unavailable_reason()}")
    weights, _ = load_file(os.path.join(path, "weights.safetensors"))
    if device == "cuda":
        weights = {k: t.cuda() for k, t in weights.items()}
    kernels_dir = os.path.join(path, "kernels")
    if os.path.isdir(kernels_dir):
        _C.cache_add_readonly(os.path.abspath(kernels_dir))
    db, _ = _C.TuningDatabase.load(os.path.join(path, "tuning"))
    arch = _C.default_cuda_arch() if device == "cuda" else "sm_90"
    variants, compiled, nkernels = [], 0, 0
    for vj in manifest["variants"]:
        with open(os.path.join(path, vj["graph"]), "rb") as f:
            graph = _C.Graph.from_bytes(f.read())
        bindings = [("arg" if kind == "arg" else "weight", x) for kind, x in vj["bindings"]]
        written = {n for n, _ in vj.get("mutations", [])}
        # The same frozen inputs as flow.jit gives (weights it does not write), so the same kernels.
        frozen = [kind == "weight" and x not in written for kind, x in bindings]
        exe = _C.compile(graph, vj["input_strides"], device, arch, bool(manifest.get("fuse", True)), db, frozen)
        compiled += exe.num_compiled
        nkernels += exe.num_kernels
        out_leaves = [(kind, x) for kind, x in vj["out_leaves"]]
        variants.append(_LoadedVariant(_spec_from_json(vj["call_spec"]), vj["call_leaves"], vj["training"], exe,
                                       bindings, _spec_from_json(vj["out_spec"]), out_leaves,
                                       [(n, k) for n, k in vj.get("mutations", [])]))
        variants[-1].autocast = vj.get("autocast")
    here = _C.target_id(device, arch)
    return LoadedModel(path, manifest, weights, variants, compiled, nkernels, here == manifest.get("target"), device)
