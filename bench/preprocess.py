"""Benchmark (not a test): a classifier's input preprocessing on uint8 images, the work the
small integer dtypes (dsl/types.h) make possible in flow.

A batch of uint8 HWC images (as a decoder or a numpy pipeline delivers them) becomes normalized
float32 NCHW input: x.permute(0, 3, 1, 2).float() / 255, minus the channel mean, over the channel
std; and the same in the images' own NHWC layout against 3-element mean and std vectors. flow
compiles each chain into one kernel that reads each byte once and writes each float once; the
floor is that traffic (1 + 4 bytes per element) at the copy bandwidth measured in this run.
Timed side by side for flow jit, flow eager, torch eager and torch.compile, plus two uint8 chains
that stay uint8 (a brightness shift that wraps, and a horizontal flip with a threshold mask), and
torchvision-style antialiased resizes (224 -> 192, bilinear and bicubic) of the images as float NCHW.

    PYTHONPATH=python .venv/bin/python bench/preprocess.py [--quick] [--no-compile]
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import add_time_columns, contender_times, cpu_bench_start, print_table, write_workloads  # noqa: E402

import flow  # noqa: E402
import torch  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def normalize(m, img, mean, std):
    return (img.permute(0, 3, 1, 2).float() / 255 - mean) / std


def normalize_hwc(m, img, mean, std):
    return (img.float() / 255 - mean.view(3)) / std.view(3)  # per channel, in the images' own layout


def brighten(m, img, mean, std):
    return img + 40  # uint8: wraps past 255, as torch's


def resize_bilinear(m, img, mean, std):  # torchvision's Resize on tensors: antialiased
    x = img.permute(0, 3, 1, 2).float() / 255
    return m.nn.functional.interpolate(x, size=(192, 192), mode="bilinear", antialias=True)


def resize_bicubic(m, img, mean, std):
    x = img.permute(0, 3, 1, 2).float() / 255
    return m.nn.functional.interpolate(x, size=(192, 192), mode="bicubic", antialias=True)


def flip_threshold(m, img, mean, std):
    return (img.flip(2) > 128).to(m.uint8) * img


def main() -> None:
    args, bw = cpu_bench_start("preprocess", "smaller batch (smoke run)")
    batch = 4 if args.quick else 64
    rng = np.random.default_rng(0)

    img = rng.integers(0, 256, (batch, 224, 224, 3), dtype=np.uint8)
    n = img.size
    workloads = [(f"normalize uint8 NHWC -> float32 NCHW, batch {batch}", normalize, n * (1 + 4)),
                 (f"normalize uint8 NHWC -> float32 NHWC, batch {batch}", normalize_hwc, n * (1 + 4)),
                 (f"brighten uint8 (+40, wraps), batch {batch}", brighten, n * 2),
                 (f"flip + threshold mask uint8, batch {batch}", flip_threshold, n * 2),
                 (f"uint8 -> float NCHW, antialiased bilinear resize to 192, batch {batch}", resize_bilinear,
                  n + batch * 3 * 192 * 192 * 4),
                 (f"uint8 -> float NCHW, antialiased bicubic resize to 192, batch {batch}", resize_bicubic,
                  n + batch * 3 * 192 * 192 * 4)]
    fmean, fstd = flow.tensor(MEAN).view(1, 3, 1, 1), flow.tensor(STD).view(1, 3, 1, 1)
    tmean, tstd = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    fimg, timg = flow.from_numpy(img), torch.from_numpy(img)
    results = []
    for name, fn, floor_bytes in workloads:
        f_jit = flow.jit(lambda x, fn=fn: fn(flow, x, fmean, fstd))
        got, want = f_jit(fimg), fn(torch, timg, tmean, tstd)
        assert got.dtype is flow.float32 if want.dtype == torch.float32 else got.dtype is flow.uint8
        err = float(np.abs(got.numpy().astype(np.float64) - want.numpy().astype(np.float64)).max())
        times = contender_times(lambda: f_jit(fimg), lambda fn=fn: fn(flow, fimg, fmean, fstd),
                                lambda fn=fn: fn(torch, timg, tmean, tstd),
                                lambda x, fn=fn: fn(torch, x, tmean, tstd), [timg], not args.no_compile)
        row = add_time_columns({"workload": name, "max |flow - torch|": f"{err:.2e}",
                                "floor ms": f"{floor_bytes / bw * 1e3:.3f}"}, times)
        results.append(row)
    columns = ["workload", "flow jit ms", "flow eager ms", "torch eager ms", "torch.compile ms", "floor ms",
               "torch/flow jit", "compile/flow jit", "max |flow - torch|"]
    print_table("uint8 image preprocessing, CPU (median of repeats)", results, columns)
    write_workloads(args.json, bw, results)


if __name__ == "__main__":
    main()
