"""python -m flow.autotune MODULE:FUNCTION --input SHAPE[:DTYPE] ... [--budget S] [--out DIR]

Builds the model with the factory (an nn.Module is put in eval mode), compiles it with flow.jit for
random inputs of the given shapes, tunes every kernel under the time budget with a progress bar,
prints a table (kernel, default time, tuned time, speedup) and writes the records
(DIR/records.jsonl) and the tuned kernels' cache entries (DIR/kernels). Running it again resumes:
workloads already in DIR are not measured again. Ctrl-C stops between kernels and keeps what is
done. ``--bundle PATH`` also writes the tuned model with flow.save.

Example: python -m flow.autotune tests.models.resnet:resnet50 --input 1x3x224x224 --budget 600 --out tuned/
"""
import argparse
import importlib
import os
import sys


def _factory(text):
    mod, _, fn = text.partition(":")
    if not mod or not fn:
        raise argparse.ArgumentTypeError(f"expected MODULE:FUNCTION, got '{text}'")
    sys.path.insert(0, os.getcwd())
    try:
        obj = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as e:
        raise argparse.ArgumentTypeError(f"cannot load {text}: {e}") from None
    if not callable(obj):
        raise argparse.ArgumentTypeError(f"{text} is not callable")
    return obj


def _input_spec(text):
    from . import parse_input_spec

    try:
        return parse_input_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None):
    from . import format_table, make_inputs, tune_model

    p = argparse.ArgumentParser(prog="python -m flow.autotune", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("factory", type=_factory, help="MODULE:FUNCTION returning the model (nn.Module or function)")
    p.add_argument("--input", action="append", required=True, type=_input_spec, metavar="SHAPE[:DTYPE]",
                   help="one per model argument, e.g. 8x3x224x224 or 8,128:int64 (repeat for more)")
    p.add_argument("--budget", type=float, default=600.0, help="seconds for the whole sweep (default 600)")
    p.add_argument("--out", default="flow-tuning", help="output directory (records and kernels)")
    p.add_argument("--strategy", default="auto", choices=["auto", "exhaustive", "random", "evolutionary"])
    p.add_argument("--max-trials", type=int, default=0, help="cap on candidates per kernel (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--bundle", default=None, help="also write the tuned model here with flow.save")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    import flow

    try:
        model = args.factory()
        if isinstance(model, flow.nn.Module):
            model.eval()
            if args.device == "cuda":
                model = model.cuda()
        inputs = make_inputs(args.input, args.device, args.seed)
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        print(f"flow.autotune: error: {e}", file=sys.stderr)
        return 2
    bar = None
    if not args.no_progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=0, unit="kernel", desc="tuning", file=sys.stderr)
        except ImportError:
            bar = None

    def progress(result, done, total):
        if bar is not None:
            bar.total = total
            bar.set_postfix_str(f"{result['name'][:28]} {result['default_us']:.0f}->{result['best_us']:.0f}us")
            bar.update(done - bar.n)
        else:
            print(f"[{done}/{total}] {result['name']}: {result['status']}", file=sys.stderr)

    print(f"flow.autotune: compiling {getattr(args.factory, '__name__', 'model')} for "
          f"{', '.join(f'{s}:{d}' for s, d in args.input)} (records in {args.out})", file=sys.stderr)
    try:
        res = tune_model(model, inputs, args.out, budget=args.budget, strategy=args.strategy,
                         max_trials=args.max_trials, seed=args.seed, progress=progress)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        from flow import _C

        db, _ = _C.TuningDatabase.load(args.out)
        print(f"\nflow.autotune: interrupted; {len(db)} workload record(s) are in {args.out}/records.jsonl. "
              "Run the same command again to resume.", file=sys.stderr)
        return 130
    if bar is not None:
        bar.close()
    print(format_table(res.results))
    tuned = sum(1 for r in res.results if r["status"] == "tuned")
    recorded = sum(1 for r in res.results if r["status"] == "record")
    print(f"\n{len(res.results)} workloads: {tuned} tuned now, {recorded} from earlier records. "
          f"Whole model: {res.default_ms:.2f} ms -> {res.tuned_ms:.2f} ms "
          f"({res.default_ms / res.tuned_ms:.2f}x) in {res.seconds:.1f} s.")
    print(f"Records: {res.records_file}; {res.kernels_exported} kernel(s) in {os.path.join(args.out, 'kernels')}.")
    if args.bundle:
        flow.save(res.compiled, args.bundle)
        print(f"Bundle: {args.bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
