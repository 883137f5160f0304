"""flow's Python-side errors and the lookup of the user's source line for messages."""
import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class TraceError(RuntimeError):
    """An operation that @flow.jit cannot record: it needs the value of a traced tensor (a
    data-dependent .item(), bool(), a numpy escape) or is not supported in traced code yet."""


def user_frame():
    """(filename, lineno, source line) of the innermost caller outside the flow package."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR + os.sep):
            import linecache

            line = linecache.getline(fn, f.f_lineno).strip()
            return fn, f.f_lineno, line
        f = f.f_back
    return "<unknown>", 0, ""


def where():
    """'file.py:42: `y = x.item()`' for the user's line."""
    fn, lineno, line = user_frame()
    loc = f"{fn}, line {lineno}"
    return f"{loc}: `{line}`" if line else loc


def trace_error(op, why):
    return TraceError(f"flow.jit: cannot trace {op}: {why} (at {where()})")
