"""``compiled.profile(*args)``: where the time of a compiled forward goes.

Every generated kernel and library call of the compiled variant for these arguments is timed inside
real runs (the executable's hooks mark each step; median of ``repeats`` runs). The result prints as
a table sorted by time, with each step's share and the totals per kind, so a user can see whether a
model is bound by its convolutions/GEMMs (the library) or by flow's own kernels.
"""
from dataclasses import dataclass
from typing import List

__all__ = ["Profile", "StepTime"]


@dataclass
class StepTime:
    kind: str  # "kernel" or "library"
    index: int  # into the executable's kernels or library calls
    group: int  # fusion group
    name: str
    seconds: float


class Profile:
    """The steps of one compiled variant with their median times (``steps``, in run order)."""

    def __init__(self, steps: List[StepTime]):
        self.steps = steps

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def seconds_by_kind(self) -> dict:
        out = {"kernel": 0.0, "library": 0.0}
        for s in self.steps:
            out[s.kind] += s.seconds
        return out

    def table(self, top: int = 30) -> str:
        total = self.total_seconds or 1.0
        by_kind = self.seconds_by_kind()
        n_k = sum(1 for s in self.steps if s.kind == "kernel")
        lines = [
            f"flow profile: {len(self.steps)} steps, {self.total_seconds * 1e3:.3f} ms "
            f"(library calls {len(self.steps) - n_k}: {by_kind['library'] * 1e3:.3f} ms, "
            f"kernels {n_k}: {by_kind['kernel'] * 1e3:.3f} ms)",
            f"{'ms':>9} {'share':>6}  {'kind':<7} {'group':>5}  name",
        ]
        ranked = sorted(self.steps, key=lambda s: -s.seconds)
        for s in ranked[:top]:
            lines.append(f"{s.seconds * 1e3:9.3f} {100 * s.seconds / total:5.1f}%  {s.kind:<7} {s.group:>5}  {s.name}")
        if len(ranked) > top:
            rest = sum(s.seconds for s in ranked[top:])
            lines.append(f"{rest * 1e3:9.3f} {100 * rest / total:5.1f}%  ({len(ranked) - top} more steps)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Profile({len(self.steps)} steps, {self.total_seconds * 1e3:.3f} ms)"


def check_repeats(repeats, who: str) -> None:
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"{who}.profile: repeats must be a positive int, got {repeats!r}")


def profile_executable(exe, inputs, repeats: int = 10, warmup: int = 2) -> Profile:
    return Profile([StepTime(**d) for d in exe.profile(inputs, repeats, warmup)])
