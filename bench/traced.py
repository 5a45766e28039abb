"""uvicorn with tracemalloc on, telling its live bytes when asked.

``python -m bench.traced REPORT [uvicorn arguments]`` runs ``uvicorn`` with those arguments in
this process, tracing every allocation Python and NumPy make (one frame each: the cheapest
tracing there is). On SIGUSR1 it collects garbage and appends one JSON line to the file
REPORT: ``traced`` (bytes Python and NumPy hold now), ``tracemalloc`` (what the tracing itself
holds, which the resident set includes) and ``rss``, all in bytes. The soak (bench/soak.py)
asks between rounds of load, when no request is in flight, so what is traced then is what the
service keeps: the cache, and whatever else it accumulates.
"""

from __future__ import annotations

import gc
import json
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

import uvicorn


def _resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return -1


def main() -> None:
    report = Path(sys.argv[1])
    tracemalloc.start(1)

    # Runs on the main thread (the event loop's), between two of its steps.
    def tell(signum: int, frame: FrameType | None) -> None:
        gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
        figures = {
            "traced": traced,
            "tracemalloc": tracemalloc.get_tracemalloc_memory(),
            "rss": _resident_bytes(),
        }
        with report.open("a") as file:
            file.write(json.dumps(figures) + "\n")

    signal.signal(signal.SIGUSR1, tell)
    sys.argv = ["uvicorn", *sys.argv[2:]]
    uvicorn.main()


if __name__ == "__main__":
    main()
