"""@flow.jit: trace a function or module once per guard key, compile the graph, run it.

The first call with a new *guard key* traces: the function runs on tracer tensors (one per tensor
argument, named after the argument), every op records into a ``_C.Graph``, and the returned
tensors (a tensor, or nested tuples/lists/dicts of them) become the graph outputs. The graph is
compiled by ``_C.compile`` for the strides of the actual arguments and run. Later calls with the
same key run the compiled variant directly.

Guard key: for each tensor argument its shape, dtype and strides (strides of size-1 dims do not
matter); every non-tensor argument by type and value (Python control flow and scalars are
specialized at trace time); the structure of the arguments; and ``module.training``. Tensors the
function reads from outside its arguments (parameters, buffers, globals) are graph inputs bound to
those Python objects at run time, so assigning new data of the same shape/dtype/layout to a
parameter needs no recompile; a different shape, dtype or layout retraces.

Parameters and buffers of the jitted module are bound by name: a parameter replaced by
another of the same shape, dtype and layout is used without retracing.

A call made while another trace is active (a jitted submodule or helper) is inlined into it.

Tuning (autotune/ in C++): ``tuning=DIR`` (or ``$FLOW_TUNING``) makes every compile use the tuning
records in DIR (the fastest recorded Params of each kernel's workload on this target) instead of
the heuristics. ``autotune=True`` tunes each new variant on its first call, on that call's real
inputs, for ``budget`` seconds (default 30) shared by its kernels; new records are appended to DIR
when one is given (so the next process starts tuned) and are used by later compiles of this
function either way.
"""
import functools
import inspect
import math
import os
import sys
import weakref

from . import _C
from . import amp as _amp
from ._dispatch import TraceContext, current_trace
from ._errors import TraceError
from ._profile import Profile, check_repeats, profile_executable
from ._epoch import on_change, rebinds, structure_version
from ._tensor import Tensor
from .nn._module_store import ModuleStore

__all__ = ["jit", "JitFunction"]


# ---- pytrees (tuples, lists, dicts, namedtuples of leaves) -------------------------------------


# Note: plain module-level recursion, not closures that call themselves: a self-referencing
# closure is a reference cycle, and a cycle holding the leaves kept every call's output tensors
# alive until the garbage collector ran, so the allocator could not reuse their memory (a 15x
# slowdown of a memory-bound jitted function from page faults alone).


def _flatten_into(o, leaves):
    if isinstance(o, Tensor):
        leaves.append(o)
        return "T"
    t = type(o)
    if t in (list, tuple):
        return (t.__name__, tuple(_flatten_into(x, leaves) for x in o))
    if isinstance(o, tuple) and hasattr(o, "_fields"):
        return (t, tuple(_flatten_into(x, leaves) for x in o))
    if t is dict:
        keys = tuple(o.keys())
        return ("dict", keys, tuple(_flatten_into(o[k], leaves) for k in keys))
    leaves.append(o)
    return "V"


def _flatten(obj):
    leaves = []
    spec = _flatten_into(obj, leaves)
    return leaves, spec


_TENSOR_ARGS_SPECS = {}  # n -> the spec _flatten gives (args, {}) for n flow.Tensor args


def _flatten_call(args, kwargs):
    """_flatten((args, kwargs)), with a shortcut for the common call: flow.Tensor arguments only."""
    if not kwargs and all(type(a) is Tensor for a in args):
        spec = _TENSOR_ARGS_SPECS.get(len(args))
        if spec is None:
            spec = _TENSOR_ARGS_SPECS.setdefault(len(args), _flatten((args, {}))[1])
        return list(args), spec
    return _flatten((args, kwargs))


def _unflatten_from(s, it):
    if s in ("T", "V"):
        return next(it)
    if s[0] == "list":
        return [_unflatten_from(x, it) for x in s[1]]
    if s[0] == "tuple":
        return tuple(_unflatten_from(x, it) for x in s[1])
    if s[0] == "dict":
        return {k: _unflatten_from(x, it) for k, x in zip(s[1], s[2])}
    return s[0](*[_unflatten_from(x, it) for x in s[1]])  # namedtuple


def _unflatten(spec, leaves):
    return _unflatten_from(spec, iter(leaves))


def _layout_key(c):
    """The strides of flow._C tensor c, -1 for size-1 dims (one definition: _C's jit_key)."""
    return c.jit_key()[3]


def _leaf_key(x):
    if isinstance(x, Tensor):
        if x._c is None:
            raise TraceError("flow.jit: a traced tensor was passed to a jitted function outside its trace")
        return x._c.jit_key()
    if type(x) is float and (x != x or (x == 0 and math.copysign(1.0, x) < 0)):
        return ("F", float, x.hex())  # -0.0 == 0.0 and nan != nan: the bits tell them apart
    try:
        hash(x)
        return ("V", type(x), x)
    except TypeError:
        return ("R", type(x), repr(x))


# ---- compiled variants ---------------------------------------------------------------------------


def _walk_module_tensors(module):
    """(name -> tensor for a module's parameters and buffers, named as named_parameters() and
    named_buffers() name them; whether every store on the way counts its changes, see
    flow/nn/_module_store.py). One flat pre-order walk: named_modules()' chain of nested generators
    cost ~1 ms per call on MobileNetV3 (267 tensors, 5 levels deep)."""
    if module is None:
        return {}, True
    params, buffers = {}, {}
    seen_params, seen_buffers, seen_modules = set(), set(), set()
    tracked = True
    stack = [("", module)]
    while stack:
        prefix, m = stack.pop()
        if id(m) in seen_modules:
            continue
        seen_modules.add(id(m))
        dot = prefix + "." if prefix else ""
        children = m._modules
        for store, seen, into in ((m._parameters, seen_params, params), (m._buffers, seen_buffers, buffers)):
            tracked = tracked and type(store) is ModuleStore
            for name, t in store.items():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    into[dot + name] = t
        tracked = tracked and type(children) is ModuleStore
        stack.extend(reversed([(dot + name, c) for name, c in children.items() if c is not None]))
    params.update(buffers)
    return params, tracked


def _module_tensors(module):
    """name -> tensor for a module's parameters and buffers (walked afresh, so a reassigned
    parameter is seen)."""
    return _walk_module_tensors(module)[0]


class _ModuleState:
    """The name -> tensor map of a jitted module (_module_tensors), walked again only when some
    module's parameters, buffers or children changed since (structure_version()), or at every call
    when the tree holds a store that does not count its changes."""

    def __init__(self, module):
        self.module = module
        self.version = None  # structure_version() at the last walk; None: walk at every call
        self.tensors = {}
        _MODULE_STATES.add(self)

    def get(self):
        """The current map (shared: callers must not change it)."""
        now = structure_version()
        if self.version is None or self.version != now:
            self.tensors, tracked = _walk_module_tensors(self.module)
            self.version = now if tracked else None
        return self.tensors


# The variants holding a graph-input template (run_executable), and every jitted module's walk.
# Every counted change drops the templates, and a structure change the stale walks, at once
# (flow/_epoch.py): no function, called again or not, keeps a replaced weight alive. Changes are
# rare after a model is built.
_TEMPLATED = weakref.WeakSet()
_MODULE_STATES = weakref.WeakSet()


def _drop_stale_bindings():
    if _TEMPLATED:
        for v in list(_TEMPLATED):
            v._template = None
        _TEMPLATED.clear()
    now = structure_version()
    for st in list(_MODULE_STATES):
        if st.tensors and st.version != now:
            st.tensors = {}  # walked again at its next get()


on_change(_drop_stale_bindings)


def arg_slots(bindings):
    """[(graph-input slot, flat argument index)] of the bindings that are the call's arguments."""
    return [(slot, x) for slot, (kind, x) in enumerate(bindings) if kind == "arg"]


def run_executable(holder, flat, inputs_of, keep=True):
    """holder.exe's outputs for a call with flat arguments `flat`. `holder` (a compiled variant) has
    `exe`, `_arg_slots` ([(graph-input slot, flat index)]) and `_template`: (epoch, a
    flow._C.InputTemplate of the graph inputs with the argument slots empty). While
    (structure_version(), rebinds()) stays the template's epoch, a call passes only its arguments:
    no weight is converted, checked or touched from Python (~0.2 ms per MobileNetV3 call). Else
    `inputs_of()` binds every graph input and, with `keep`, a new template is kept. One tuple, so
    that another thread never pairs one epoch with another's template; dropped at every counted
    change (_drop_stale_bindings)."""
    epoch = (structure_version(), rebinds())
    kept = holder._template
    if kept is not None and kept[0] == epoch:
        return holder.exe.run_template(kept[1], [flat[i]._c for _, i in holder._arg_slots])
    inputs = inputs_of()
    if not keep:
        return holder.exe.run(inputs)
    template = holder.exe.template(inputs, [slot for slot, _ in holder._arg_slots])
    holder._template = (epoch, template)
    _TEMPLATED.add(holder)
    return holder.exe.run_template(template, [inputs[slot] for slot, _ in holder._arg_slots])


def build_outputs(out_spec, out_leaves, outs, input_of):
    """The function's return value: `out_leaves` are ("out", k) for output k of the executable,
    ("input", b) for the tensor bound to graph input b (``input_of(b)``), or ("const", value)."""
    leaves = []
    for kind, x in out_leaves:
        if kind == "out":
            leaves.append(Tensor._wrap(outs[x]))
        elif kind == "input":
            leaves.append(input_of(x))
        else:
            leaves.append(x)
    return _unflatten(out_spec, leaves)


def frozen_inputs(bindings, mutations):
    """One flag per graph input: True for a parameter, buffer or captured tensor that the function does
    not write (its derived values are cached by the executable until its storage or version changes,
    see scheduler/frozen.h); False for arguments and written tensors."""
    written = {("module", x) if kind == "module" else ("capture", id(x)) for (kind, x), _ in mutations
               if kind != "arg"}
    flags = []
    for kind, x in bindings:
        if kind == "arg":
            flags.append(False)
        else:
            flags.append((kind, x if kind == "module" else id(x)) not in written)
    return flags


class _Variant:
    def __init__(self, graph, exe, bindings, out_spec, out_leaves, module_state, mutations=()):
        self.graph = graph
        self.exe = exe
        # Tensors outside the trace written during it: (("module", name) | ("capture", Tensor) |
        # ("arg", flat index), output index); each run copies that output into the tensor.
        self.mutations = list(mutations)
        self._written_args = [x for (kind, x), _ in self.mutations if kind == "arg"]
        # per graph input: ("arg", flat index) | ("module", parameter/buffer name) | ("capture", Tensor)
        self.bindings = bindings
        self.out_spec = out_spec
        self.out_leaves = out_leaves  # ("out", k) | ("input", binding index) | ("const", obj)
        self.module_state = module_state
        self.uses_module = any(kind == "module" for kind, _ in bindings) or any(
            kind == "module" for (kind, _), _ in self.mutations)
        state = module_state.get() if self.uses_module else {}
        # [kind, name or tensor, traced meta, a weak reference to the flow._C tensor last seen with
        # that meta]: a flow._C tensor never changes its shape, dtype or strides (in-place view ops
        # and `.data =` give the Tensor a new one), so seeing the same one again skips the
        # comparison. Weak, so that a variant no longer called keeps no replaced weights alive.
        self.guards = []
        for kind, x in bindings:
            if kind != "arg":
                t = self._resolve(kind, x, None, state)
                c = t._c if isinstance(t, Tensor) else None
                self.guards.append([kind, x, self._meta(t), weakref.ref(c) if c is not None else None])
        # (structure_version(), rebinds()) at the last full check that passed (None: none yet, or
        # the module holds a store that does not count its changes): check()'s fast path.
        self._checked_epoch = None
        # (epoch, flow._C.InputTemplate of the graph inputs with the argument slots empty):
        # run_executable.
        self._template = None
        self._arg_slots = arg_slots(bindings)

    @staticmethod
    def _meta(t):
        c = t._c if isinstance(t, Tensor) else None
        return None if c is None else (tuple(c.shape), c.dtype, _layout_key(c))

    @staticmethod
    def _resolve(kind, x, flat, state):
        if kind == "arg":
            return flat[x]
        if kind == "module":
            return state.get(x)
        return x

    def check(self):
        """The module state of this call if every non-argument input still matches what was traced
        (shape, dtype, layout), else None.

        Fast path: while no module structure changed and no Tensor anywhere was given another
        flow._C tensor (flow/_epoch.py) since the last full check passed, the guarded inputs are the
        same flow._C tensors, whose meta never changes: all guards pass without touching one.
        (Touching each guarded Tensor cost ~100 us per MobileNetV3 call: after the model's kernels
        ran, every one of those objects was a cache miss.)"""
        now_rebinds = rebinds()  # before anything is read: a later rebind is seen by the next call
        state = self.module_state.get() if self.uses_module else {}
        version = self.module_state.version if self.uses_module else 0
        epoch = (version, now_rebinds) if version is not None else None
        if epoch is not None and epoch == self._checked_epoch:
            return state
        for guard in self.guards:
            kind, x, meta, seen = guard
            t = self._resolve(kind, x, None, state)
            c = t._c if isinstance(t, Tensor) else None
            if c is not None and seen is not None and seen() is c:
                continue
            if self._meta(t) != meta:
                return None
            guard[3] = weakref.ref(c) if c is not None else None
        self._checked_epoch = epoch
        return state

    def bound(self, flat, state):
        """The graph inputs of a call (flow._C tensors), in graph-input order."""
        return [self._resolve(kind, x, flat, state)._c for kind, x in self.bindings]

    def _run_exe(self, flat, state):
        # A module holding a store that does not count its changes gets no template.
        keep = not self.uses_module or self.module_state.version is not None
        return run_executable(self, flat, lambda: self.bound(flat, state), keep)

    def _check_written_args(self, flat, state):
        """An argument the function writes in place must not overlap another graph input (an
        argument, a parameter or buffer, a captured tensor): the compiled graph reads every input
        before the write-back, where eager code would read the written values through the other."""
        inputs = [self._resolve(kind, x, flat, state) for kind, x in self.bindings]
        for i in self._written_args:
            mine = flat[i]._c
            for (kind, x), other in zip(self.bindings, inputs):
                if (kind, x) == ("arg", i) or not isinstance(other, Tensor) or not _overlap(mine, other._c):
                    continue
                what = {"arg": f"argument {x}", "module": f"'{x}'"}.get(kind, "a captured tensor")
                raise RuntimeError(f"flow.jit: argument {i} is written in place and overlaps {what}; the compiled "
                                   f"function would read {what} before the write (pass a tensor that does not "
                                   f"overlap it, or clone one)")

    def run(self, flat, state):
        if self._written_args:
            self._check_written_args(flat, state)
        outs = self._run_exe(flat, state) if self.exe is not None else []
        targets = [self._resolve(kind, x, flat, state) for (kind, x), _ in self.mutations]
        sources = [outs[k] for _, k in self.mutations]
        if len(targets) > 1:  # an output may be an input's memory: copy it before any write-back lands
            sources = [s.contiguous() if any(_overlap(s, t._c) for t in targets) else s for s in sources]
        for t, src in zip(targets, sources):
            t.copy_(Tensor._wrap(src))
        return build_outputs(self.out_spec, self.out_leaves, outs,
                             lambda b: self._resolve(*self.bindings[b], flat, state))


def _overlap(a, b):
    """Whether flow._C tensors a and b may touch the same bytes (the spans their elements lie in)."""
    if a.storage_ptr() != b.storage_ptr() or a.numel() == 0 or b.numel() == 0:  # the cheap test first
        return False

    def span(c):
        last = sum((n - 1) * st for n, st in zip(c.shape, c.strides))
        return c.data_ptr(), c.data_ptr() + (last + 1) * c.itemsize

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


class JitFunction:
    """A traced-and-compiled callable. Call it like the original; ``explain()`` describes the
    latest compiled variant; ``num_kernels`` / ``num_compiled`` count its kernels / the kernels
    its compile produced (not found in the cache); ``num_traces`` counts traces."""

    def __init__(self, fn, module=None, target="cpu", fuse=True, cuda_arch="sm_90", tuning=None,
                 autotune=False, budget=None, amp=None, conv_search=None, cuda_graphs=False):
        if conv_search is None:  # torch.backends.cudnn.benchmark's meaning (flow/backends.py)
            from . import backends

            conv_search = "exhaustive" if backends.cudnn.benchmark else "heuristic"
        if budget is not None and not (isinstance(budget, (int, float)) and budget > 0):
            raise ValueError(f"flow.jit: budget must be a positive number of seconds, got {budget!r}")
        self._amp = None if amp is None or amp is False else _amp.dtype_name(amp, "flow.jit: amp")
        if conv_search not in ("heuristic", "exhaustive"):
            raise ValueError(f"flow.jit: conv_search must be 'heuristic' or 'exhaustive', got {conv_search!r}")
        self._conv_search = conv_search
        self._cuda_graphs = bool(cuda_graphs)
        self._fn = fn
        self._module = module
        self._module_state = _ModuleState(module)
        self._target = target
        self._fuse = fuse
        self._cuda_arch = cuda_arch
        self._tuning_dir = os.fspath(tuning) if tuning is not None else (os.environ.get("FLOW_TUNING") or None)
        self._tuning_db = None
        self._autotune = bool(autotune)
        self._budget = float(budget) if budget is not None else 30.0
        self.tuning_results = []  # one dict per tuned workload (online autotuning)
        self._variants = {}
        # A cap on the variants kept, least recently used dropped first (None: all kept; set by
        # fused_in_eager, whose functions meet ever new shapes).
        self._max_variants = None
        self._latest = None
        self.num_traces = 0
        try:
            self._arg_names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._arg_names = []
        functools.update_wrapper(self, fn, updated=())

    # The key of a call: argument structure and leaves, plus the module's training flag.
    def _amp_device(self, flat):
        """The device type whose autocast lists a trace of this call uses."""
        on_cuda = self._target == "cuda" or any(isinstance(x, Tensor) and x._c is not None and x.is_cuda for x in flat)
        return "cuda" if on_cuda else "cpu"

    def _key(self, flat, spec):
        mode = self._module.training if self._module is not None else None
        # The flow.autocast policy of the device this call traces for (amp= overrides it).
        amp = None if self._amp is not None or not _amp._state() else _amp._state().get(self._amp_device(flat))
        return (spec, tuple(_leaf_key(x) for x in flat), mode, amp)

    def __call__(self, *args, **kwargs):
        flat, spec = _flatten_call(args, kwargs)
        ctx = current_trace()
        if ctx is not None or any(isinstance(x, Tensor) and x._c is None for x in flat):
            if self._amp is not None and ctx is not None:  # inline, keeping this function's amp=
                with _amp.autocast(_amp.trace_device(ctx), self._amp):
                    return self._fn(*args, **kwargs)
            return self._fn(*args, **kwargs)  # inside another trace: inline
        key = self._key(flat, spec)
        v = self._variants.get(key)
        state = v.check() if v is not None else None
        if state is None:
            v = self._trace_and_compile(flat, spec)
            if self._max_variants is not None:
                self._variants.pop(key, None)  # a retraced key is the most recent too
            self._variants[key] = v
            state = v.check()
            if self._max_variants is not None:
                self._drop_least_recent()
        elif self._max_variants is not None:
            self._variants.pop(key, None)  # most recently used last (pop, not del: threads may race)
            self._variants[key] = v
        self._latest = v
        return v.run(flat, state)

    def _drop_least_recent(self):
        while len(self._variants) > self._max_variants:
            try:
                del self._variants[next(iter(self._variants))]
            except (StopIteration, KeyError, RuntimeError):  # another thread changed the dict
                return

    def _input_name(self, spec, flat_index):
        # Positional tensor arguments are named after the function's parameters where possible.
        if spec[0] == "tuple":
            args_spec = spec[1][0]
            if flat_index < len(args_spec[1]) and all(s in ("T", "V") for s in args_spec[1][:flat_index + 1]):
                names = [n for n in self._arg_names if n != "self"]
                if flat_index < len(names):
                    return names[flat_index]
        return f"arg{flat_index}"

    def _database(self):
        """The tuning records this function compiles with (loaded once; None without a tuning dir
        or autotuning)."""
        if self._tuning_db is None and (self._tuning_dir is not None or self._autotune):
            if self._tuning_dir is not None:
                self._tuning_db, _ = _C.TuningDatabase.load(self._tuning_dir)
            else:
                self._tuning_db = _C.TuningDatabase()
        return self._tuning_db

    def _tune(self, exe, inputs):
        """Online autotuning of a new variant (see the module doc)."""
        db = self._database()
        records = os.path.join(self._tuning_dir, "records.jsonl") if self._tuning_dir is not None else None
        calls = f" and {exe.num_library_calls} library call(s)" if exe.num_library_calls else ""
        print(f"flow.jit: autotuning {exe.num_kernels} kernel(s){calls} for up to {self._budget:.0f} s", file=sys.stderr)

        def progress(result, done, total):
            if result["record"] is not None:
                db.add_json(result["record"])
                if records is not None:
                    _C.TuningDatabase.append(records, result["record"])
            print(f"  [{done}/{total}] {result['name']}: {result['status']} {result['default_us']:.1f} us -> "
                  f"{result['best_us']:.1f} us", file=sys.stderr)

        self.tuning_results.extend(exe.tune(inputs, budget=self._budget, existing=db, progress=progress))

    def _trace_and_compile(self, flat, spec):
        ctx = TraceContext()
        ctx.device = next((x.device for x in flat if isinstance(x, Tensor) and x._c is not None and x.is_cuda), None)
        # torch.autocast's lists differ by device type (see dsl/autocast.h). amp= wins over an
        # enclosing flow.autocast block.
        ctx.autocast_device = self._amp_device(flat)
        amp = self._amp if self._amp is not None else _amp._state().get(ctx.autocast_device)
        if amp is not None:
            ctx.graph.set_autocast(amp, ctx.autocast_device)
        self.num_traces += 1
        with ctx:
            traced = []
            for i, leaf in enumerate(flat):
                if isinstance(leaf, Tensor):
                    vid = ctx.add_arg(i, leaf.shape, leaf.dtype.name, self._input_name(spec, i))
                    traced.append(ctx.arg_tracer(Tensor._tracer(ctx, vid), vid))
                else:
                    traced.append(leaf)
            targs, tkwargs = _unflatten(spec, traced)
            out = self._fn(*targs, **tkwargs)
        ctx.graph.set_autocast(None)  # the finished graph (jf.graph, exe.graph) adds no more casts
        out_flat, out_spec = _flatten(out)
        input_vids = {}
        for b, vid in enumerate(ctx.graph.inputs):
            input_vids[vid] = b
        out_leaves, marked = [], {}
        for leaf in out_flat:
            if isinstance(leaf, Tensor) and leaf._c is None:
                if leaf._ctx is not ctx:
                    raise TraceError("flow.jit: the function returned a tensor traced by another trace")
                if id(leaf) in ctx.written_args:  # an argument written in place: the argument itself
                    out_leaves.append(("input", ctx.written_args[id(leaf)][1]))
                    continue
                if leaf._vid in input_vids:
                    out_leaves.append(("input", input_vids[leaf._vid]))
                    continue
                if leaf._vid not in marked:
                    marked[leaf._vid] = len(marked)
                    ctx.graph.mark_output(leaf._vid)
                out_leaves.append(("out", marked[leaf._vid]))
            else:
                out_leaves.append(("const", leaf))
        # Tensors written during the trace: their new values are outputs too.
        mutation_outs = []
        for t, vid in ctx.mutations.values():
            if vid not in marked:
                marked[vid] = len(marked)
                ctx.graph.mark_output(vid)
            mutation_outs.append((t, marked[vid]))
        # Captured parameters and buffers of the module are bound by name (see _module_tensors).
        names = {id(t): n for n, t in self._module_state.get().items()}
        mutations = [(("module", names[id(t)]) if id(t) in names else ("capture", t), k) for t, k in mutation_outs]
        for tracer, b in ctx.written_args.values():  # arguments written in place: written back too
            if tracer._vid not in marked:
                marked[tracer._vid] = len(marked)
                ctx.graph.mark_output(tracer._vid)
            mutations.append((ctx.bindings[b], marked[tracer._vid]))
        bindings = [("module", names[id(x)]) if kind == "capture" and id(x) in names else (kind, x)
                    for kind, x in ctx.bindings]
        exe = None
        if marked:
            bound = [(flat[x] if kind == "arg" else x)._c for kind, x in ctx.bindings]
            strides = [list(c.strides) for c in bound]
            # Tensors on a GPU compile for it (the device's own architecture); else the given target.
            on_gpu = any(c.device == "cuda" for c in bound)
            target = "cuda" if on_gpu else self._target
            arch = _C.default_cuda_arch() if on_gpu else self._cuda_arch
            exe = _C.compile(ctx.graph, strides, target, arch, self._fuse, self._database(),
                             frozen_inputs(bindings, mutations), cuda_graphs=self._cuda_graphs,
                             conv_search=self._conv_search)
            if self._autotune:
                self._tune(exe, bound)
        v = _Variant(ctx.graph, exe, bindings, out_spec, out_leaves, self._module_state, mutations)
        v.autocast = (amp, ctx.autocast_device) if amp is not None else None
        return v

    # ---- introspection ------------------------------------------------------------------------

    def _require_latest(self):
        if self._latest is None:
            raise RuntimeError("flow.jit: nothing compiled yet; call the function first")
        return self._latest

    def profile(self, *args, repeats: int = 10, **kwargs):
        """Times every kernel and library call of the variant these arguments select (compiling
        it first if needed) over ``repeats`` real runs; returns a ``flow.Profile`` (print it)."""
        check_repeats(repeats, "flow.jit")
        self(*args, **kwargs)
        flat, _ = _flatten((args, kwargs))
        v = self._latest
        state = v.check()
        if v.exe is None:
            return Profile([])
        return profile_executable(v.exe, v.bound(flat, state), repeats)

    def explain(self, with_source=True):
        """Graph, fusion groups, rejected merges, kernels and generated source of the latest
        compiled variant (a string)."""
        v = self._require_latest()
        if v.exe is None:
            return "flow.jit: the traced function computes nothing (no tensor outputs)\n" + v.graph.to_string()
        head = ""
        if getattr(v, "autocast", None) is not None:
            head = (f"== autocast: {v.autocast[0]} with torch.autocast's {v.autocast[1]} lists "
                    f"({v.graph.to_string().count('= cast(')} cast nodes in the traced graph) ==\n")
        if v.mutations:
            names = {"arg": lambda x: f"argument {x}", "module": lambda x: f"'{x}'",
                     "capture": lambda x: f"a captured tensor {list(x.shape)}"}
            written = ", ".join(names[kind](x) for (kind, x), _ in v.mutations)
            head += f"== written in place, after every run: {written} ==\n"
        return head + v.exe.explain(with_source)

    @property
    def graph(self):
        return self._require_latest().graph

    @property
    def executable(self):
        return self._require_latest().exe

    @property
    def num_kernels(self):
        v = self._require_latest()
        return v.exe.num_kernels if v.exe is not None else 0

    @property
    def num_compiled(self):
        v = self._require_latest()
        return v.exe.num_compiled if v.exe is not None else 0

    @property
    def num_variants(self):
        return len(self._variants)

    def reset(self):
        """Forgets every compiled variant (the kernel cache is untouched)."""
        self._variants.clear()
        self._latest = None


class JitModule:
    """A jitted module instance: calls run the compiled forward; other attributes are the module's."""

    def __init__(self, module, **opts):
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_jit", JitFunction(module.forward, module=module, **opts))

    def __call__(self, *args, **kwargs):
        return self._jit(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_module"), name)

    def __setattr__(self, name, value):
        setattr(self._module, name, value)

    def explain(self, with_source=True):
        return self._jit.explain(with_source)

    def profile(self, *args, repeats: int = 10, **kwargs):
        return self._jit.profile(*args, repeats=repeats, **kwargs)

    num_kernels = property(lambda self: self._jit.num_kernels)
    num_compiled = property(lambda self: self._jit.num_compiled)
    num_traces = property(lambda self: self._jit.num_traces)
    num_variants = property(lambda self: self._jit.num_variants)

    def __repr__(self):
        return f"flow.jit({self._module!r})"


def _jit_module_class(cls, opts):
    def _flow_jit(self):
        j = self.__dict__.get("_flow_jit_fn")
        if j is None:
            j = JitFunction(self.forward, module=self, **opts)
            object.__setattr__(self, "_flow_jit_fn", j)
        return j

    def __call__(self, *args, **kwargs):
        return _flow_jit(self)(*args, **kwargs)

    def explain(self, with_source=True):
        return _flow_jit(self).explain(with_source)

    def profile(self, *args, repeats: int = 10, **kwargs):
        return _flow_jit(self).profile(*args, repeats=repeats, **kwargs)

    ns = {
        "__call__": __call__,
        "explain": explain,
        "profile": profile,
        "num_kernels": property(lambda self: _flow_jit(self).num_kernels),
        "num_compiled": property(lambda self: _flow_jit(self).num_compiled),
        "num_traces": property(lambda self: _flow_jit(self).num_traces),
        "num_variants": property(lambda self: _flow_jit(self).num_variants),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    return type(cls.__name__, (cls,), ns)


def jit(obj=None, *, target="cpu", fuse=True, cuda_arch="sm_90", tuning=None, autotune=False, budget=None,
        amp=None, conv_search=None, cuda_graphs=False):
    """Compile a function, an nn.Module subclass or an nn.Module instance (see the module doc).

    tuning: a directory of tuning records to compile with (default: $FLOW_TUNING).
    autotune: tune each new variant on its first call for ``budget`` seconds (default 30).
    amp: ``"float16"`` or ``"bfloat16"`` (or the flow/torch dtype): automatic mixed precision, as
    ``torch.autocast(device_type, dtype=amp)`` around the call would give (dsl/autocast.h).
    conv_search: how cuDNN convolution algorithms are chosen on CUDA: ``"heuristic"`` (cuDNN's
    ranking, no timing) or ``"exhaustive"`` (every algorithm timed on the first call's buffers);
    default: ``"exhaustive"`` when ``flow.backends.cudnn.benchmark`` is True, else ``"heuristic"``.
    cuda_graphs: on CUDA, replay each compiled variant as one CUDA graph from its third call on (as
    torch.compile's ``mode="reduce-overhead"``; outputs are copied out of the graph's buffers)."""
    opts = {"target": target, "fuse": fuse, "cuda_arch": cuda_arch, "tuning": tuning, "autotune": autotune,
            "budget": budget, "amp": amp, "conv_search": conv_search, "cuda_graphs": cuda_graphs}
    if obj is None:
        return lambda o: jit(o, **opts)
    from .nn.modules import Module

    if isinstance(obj, type):
        if issubclass(obj, Module):
            return _jit_module_class(obj, opts)
        raise TypeError(f"flow.jit: can decorate a function or an nn.Module subclass, not class {obj.__name__}")
    if isinstance(obj, Module):
        return JitModule(obj, **opts)
    if callable(obj):
        return JitFunction(obj, **opts)
    raise TypeError(f"flow.jit: expected a function or an nn.Module, got {type(obj).__name__}")


_COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile's signature over flow.jit, so ``import flow as torch`` ports a compiled model.
    ``mode="reduce-overhead"`` replays CUDA graphs (``cuda_graphs=True``), ``"max-autotune"``
    autotunes each new variant on its first call (``autotune=True``; ``"max-autotune-no-cudagraphs"``
    the same), the default compiles with the cached or default schedules. flow always traces whole
    graphs (``fullgraph``), and its kernels are shape-generic (``dynamic``), so those two change
    nothing. ``backend="eager"`` or ``disable=True`` returns ``model`` itself; ``options`` are refused."""
    if mode not in _COMPILE_MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _COMPILE_MODES if m)}")
    if options:
        raise NotImplementedError("flow.compile: options= (inductor's settings) are not supported; use flow.jit's "
                                  "arguments")
    if backend not in ("inductor", "flow", "eager"):
        raise NotImplementedError(f"flow.compile: backend {backend!r} is not available (flow compiles with its own "
                                  f"backend; 'eager' runs uncompiled)")
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if disable or backend == "eager":
        return model
    return jit(model, cuda_graphs=mode == "reduce-overhead", autotune=mode in ("max-autotune",
                                                                                 "max-autotune-no-cudagraphs"))
