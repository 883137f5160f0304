"""The one dispatcher every flow op goes through, and the tracing state behind @flow.jit.

``dispatch(op, args, attrs)``: while a trace is active (inside the first call of a @flow.jit
function) the op is recorded into the trace's ``_C.Graph`` and tracer tensors come back; otherwise
it runs eagerly through ``_C.eager``. During a trace, a concrete flow tensor met as an argument (a
parameter, a buffer, a tensor from the enclosing scope) becomes an extra graph input, bound to that
same Python object at every run, so updating a parameter's data needs no recompile. Python scalars
become wrapped-number constants (they promote by category, as in torch).

In-place writes into a concrete tensor during a trace (a BatchNorm buffer's running statistics, a
counter) are *mutations*: the trace records the new value, later reads of that tensor in the same
trace see it, and the compiled function writes it back into the tensor after every run.

View ops (``VIEW_OPS``) run eagerly through ``_C.view`` (a zero-copy alias, no kernel); in a trace
they are graph nodes, and the trace remembers which values were viewed or are views, so an
in-place op on a tracer (functionalized as a rebinding of the tracer to the new value) is refused
where another tensor would have to see the write.
"""
import threading

from . import _C
from . import amp as _amp
from ._errors import TraceError, where

_local = threading.local()

VIEW_OPS = frozenset(("reshape", "view", "permute", "expand", "slice", "select", "as_strided"))


def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def current_trace():
    s = _stack()
    return s[-1] if s else None


class TraceContext:
    """One trace: the graph, and what binds each graph input at run time."""

    def __init__(self):
        self.graph = _C.Graph()
        self.bindings = []  # per graph input: ("arg", flat index) or ("capture", Tensor)
        self._captured = {}  # id(Tensor) -> value id (the Tensor is held in bindings)
        self.active = True
        self.device = None  # the device the traced inputs live on (None: cpu)
        self.aliased = set()  # value ids that are views or were viewed (in-place on them is refused)
        self.broadcast_views = set()  # value ids of views of an expand (they may have zero strides)
        self.mutations = {}  # id(Tensor) -> [Tensor, value id of its new value] (written back after runs)
        self.arg_tracers = {}  # id(tracer) -> graph input index: the tracers standing for the arguments
        self.written_args = {}  # id(tracer) -> [tracer, graph input index]: arguments written in place

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        self.active = False
        return False

    def add_arg(self, index, shape, dtype_name, name):
        vid = self.graph.add_input(list(shape), dtype_name, name)
        self.bindings.append(("arg", index))
        return vid

    def capture(self, t):
        vid = self._captured.get(id(t))
        if vid is None:
            c = t._c
            vid = self.graph.add_input(list(c.shape), c.dtype, f"captured{len(self._captured)}")
            self._captured[id(t)] = vid
            self.bindings.append(("capture", t))
        return vid

    def constant(self, v):
        if isinstance(v, bool):
            return self.graph.add_constant(1.0 if v else 0.0, "bool", True)
        if isinstance(v, int):
            return self.graph.add_constant(float(v), "int64", True)
        return self.graph.add_constant(float(v), "float64", True)

    def viewed_before_write(self, t):
        """Whether the trace took a view of concrete tensor `t` (captured, not yet written): a write
        into it now would not reach that view."""
        vid = self._captured.get(id(t))
        return vid is not None and vid in self.aliased and id(t) not in self.mutations

    def arg_tracer(self, tracer, vid):
        """Registers `tracer` as the one standing for the argument bound to graph input `vid`."""
        self.arg_tracers[id(tracer)] = list(self.graph.inputs).index(vid)
        return tracer

    def write_arg(self, tracer):
        """Records an in-place write into `tracer` when it stands for a function argument (by
        identity: another tracer holding the argument's value, after `t.copy_(x)`, is a tensor of its
        own): after every run, the argument receives the tracer's final value."""
        b = self.arg_tracers.get(id(tracer))
        if b is not None and id(tracer) not in self.written_args:
            self.written_args[id(tracer)] = [tracer, b]

    def mutate(self, t, vid):
        """Records that concrete tensor `t` now holds graph value `vid`."""
        self.mutations[id(t)] = [t, vid]

    def value_id(self, a):
        from ._tensor import Tensor

        if isinstance(a, Tensor):
            if a._c is not None:
                m = self.mutations.get(id(a))
                return m[1] if m is not None else self.capture(a)
            if a._ctx is not self:
                raise TraceError(f"flow.jit: a tensor traced by another (finished) trace was used (at {where()})")
            return a._vid
        return self.constant(a)


_Tensor = None  # flow.Tensor, bound at the first dispatch (flow._tensor imports this module)


def _tensor_class():
    global _Tensor
    from ._tensor import Tensor

    _Tensor = Tensor
    return Tensor


def dispatch(op, args, attrs=None):
    """Runs or records `op` over `args` (Tensors and Python scalars); returns a list of Tensors."""
    Tensor = _Tensor or _tensor_class()
    attrs = attrs or {}
    ctx = current_trace()
    if ctx is None and op not in VIEW_OPS:
        args = _amp.cast_args(op, args)  # flow.autocast (a no-op outside one)
    if ctx is not None:
        ids = [ctx.value_id(a) for a in args]
        outs = ctx.graph.add_op(op, ids, attrs)
        if op in VIEW_OPS:
            ctx.aliased.update(ids[:1])
            ctx.aliased.update(outs)
            if op == "expand" or op == "as_strided" or ids[0] in ctx.broadcast_views:
                ctx.broadcast_views.update(outs)
        return [Tensor._tracer(ctx, v) for v in outs]
    cargs = []
    for a in args:
        if isinstance(a, Tensor):
            if a._c is None:
                raise TraceError(f"flow.jit: a traced tensor escaped its trace and was used eagerly in {op} "
                                 f"(at {where()})")
            cargs.append(a._c)
        else:
            cargs.append(a)
    if op in VIEW_OPS and len(cargs) == 1 and not isinstance(cargs[0], (bool, int, float)):
        return [Tensor._wrap(_C.view(op, cargs[0], attrs))]

    return [Tensor._wrap(c) for c in _C.eager(op, cargs, attrs)]


def dispatch1(op, args, attrs=None):
    return dispatch(op, args, attrs)[0]
