"""Progress on the command line, one bar per stage, fed by a `ProgressListener`.

On a terminal each stage gets a live tqdm bar; when the output is a file or a pipe (CI,
`make demo | tee`), each stage prints one line when it ends instead of a stream of redraws.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm


class StageBars:
    """A `ProgressListener` that draws one bar per stage."""

    def __init__(self, stream: TextIO = sys.stderr, *, enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled
        self.live = stream.isatty()
        self._bars: dict[str, tqdm] = {}
        self._started: dict[str, float] = {}
        self._finished: set[str] = set()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage in self._finished and total and done >= total:
            return  # a stage reports its end more than once
        self._finished.discard(stage)
        self._started.setdefault(stage, time.monotonic())
        if self.live:
            self._draw(stage, done, total)
        if total and done >= total:
            self._finished.add(stage)
            self._end(stage, total)

    def _draw(self, stage: str, done: int, total: int) -> None:
        bar = self._bars.get(stage)
        if bar is None:
            bar = tqdm(total=total, desc=f"{stage:<12}", file=self.stream, dynamic_ncols=True)
            self._bars[stage] = bar
        if bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    def _end(self, stage: str, total: int) -> None:
        bar = self._bars.pop(stage, None)
        if bar is not None:
            bar.close()
        else:
            seconds = time.monotonic() - self._started.get(stage, time.monotonic())
            self.stream.write(f"{stage:<12} {total}/{total} done in {seconds:.1f} s\n")
            self.stream.flush()
        self._started.pop(stage, None)

    def close_all(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
