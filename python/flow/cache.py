"""The kernel cache from the command line: ``python -m flow.cache info|list|clear|prune``.

    info                 directory, entries, total size, size cap, read-only layers
    list [--limit N]     entries, most recently used last: key, size, last use, kernel, Params
    clear                removes every entry
    prune --max-size S   removes least recently used entries until the cache is at most S
                         (e.g. 500M, 2G)

``--dir DIR`` works on another cache directory (a bundle's ``kernels/`` for instance); the default
is the cache flow uses ($FLOW_CACHE_DIR, else ~/.cache/flow/kernels). Pruning and clearing are safe
while other processes use the cache: they only ever miss an evicted entry and compile it again.
The same functions are importable: ``flow.cache.info()``, ``.entries()``, ``.prune()``, ``.clear()``.
"""
import argparse
import datetime
import os
import sys

from . import _C

__all__ = ["info", "entries", "prune", "clear", "main"]


def _dir(directory):
    d = directory if directory is not None else _C.cache_dir()
    if not d:
        raise RuntimeError("flow.cache: the kernel cache is memory-only here (FLOW_CACHE_DIR is empty or "
                           "FLOW_DISABLE_DISK_CACHE=1); pass --dir")
    return d


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def info(directory=None) -> dict:
    d = _dir(directory)
    files = _C.cache_list(d)
    return {"directory": d, "entries": len(files), "bytes": sum(f["bytes"] for f in files),
            "max_bytes": _C.cache_max_bytes(), "readonly_layers": _C.cache_readonly_dirs()}


def entries(directory=None, describe=True) -> list:
    """Entry files, least recently used first (dicts: path, key, bytes, last_used, and with
    ``describe`` kernel, params, compile_seconds, ok)."""
    out = []
    for f in _C.cache_list(_dir(directory)):
        if describe:
            f.update(_C.cache_describe(f["path"]))
        out.append(f)
    return out


def prune(max_bytes, directory=None) -> dict:
    if isinstance(max_bytes, str):
        max_bytes = _C.parse_byte_size(max_bytes)
    return _C.cache_prune(_dir(directory), int(max_bytes))


def clear(directory=None) -> dict:
    return _C.cache_clear(_dir(directory))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m flow.cache", description="Inspect and manage flow's kernel cache.")
    p.add_argument("--dir", default=None, help="cache directory (default: the one flow uses)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="directory, entries, size")
    ls = sub.add_parser("list", help="entries, least recently used first")
    ls.add_argument("--limit", type=int, default=0, help="only the N most recently used")
    sub.add_parser("clear", help="remove every entry")
    pr = sub.add_parser("prune", help="evict least recently used entries down to a size")
    pr.add_argument("--max-size", required=True, help="e.g. 500M, 2G, or bytes")
    args = p.parse_args(argv)
    try:
        if args.command == "info":
            i = info(args.dir)
            cap = _size(i["max_bytes"]) if i["max_bytes"] else "none (set FLOW_CACHE_MAX_SIZE)"
            print(f"directory: {i['directory']}\nentries:   {i['entries']}\nsize:      {_size(i['bytes'])}\n"
                  f"size cap:  {cap}")
            for layer in i["readonly_layers"]:
                print(f"read-only: {layer}")
        elif args.command == "list":
            es = entries(args.dir)
            if args.limit > 0:
                es = es[-args.limit:]
            print(f"{'key':32}  {'size':>10}  {'last used':19}  {'compile':>8}  kernel / params")
            for e in es:
                when = datetime.datetime.fromtimestamp(e["last_used"]).strftime("%Y-%m-%d %H:%M:%S")
                what = f"{e['kernel']}  {e['params']}" if e["ok"] else f"(unreadable: {e['why']})"
                comp = f"{e['compile_seconds'] * 1e3:.0f} ms" if e["ok"] else "-"
                print(f"{e['key']}  {_size(e['bytes']):>10}  {when}  {comp:>8}  {what}")
            print(f"{len(es)} entries")
        elif args.command == "clear":
            r = clear(args.dir)
            print(f"removed {r['removed_files']} entries ({_size(r['removed_bytes'])})")
        else:
            try:
                limit = _C.parse_byte_size(args.max_size)
            except ValueError as e:
                p.error(str(e))
            r = prune(limit, args.dir)
            print(f"removed {r['removed_files']} entries ({_size(r['removed_bytes'])}); "
                  f"{r['remaining_files']} remain ({_size(r['remaining_bytes'])})")
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
