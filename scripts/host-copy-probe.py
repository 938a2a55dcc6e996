"""What the worker's host-side steps cost on this machine, per size: the steps behind a case's
setup (input files to the device, output files mapped and page-locked) and its output copies.

    python3 scripts/host-copy-probe.py OUT.json [GiB ...]

Each step is timed on its own, on files in /dev/shm as the bench makes them. Runs from the source
tree on a GPU machine."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cudamaster.bench.cudart import CudaRuntime


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return round(time.perf_counter() - t0, 4)


def probe(rt: CudaRuntime, root: Path, gib: float) -> dict[str, float]:
    n = int(gib * (1 << 30))
    row: dict[str, float] = {"gib": gib}
    src = root / "in.bin"
    row["write input file"] = _timed(lambda: np.ones(n, np.uint8).tofile(src))
    dev = [0]
    row["cudaMalloc"] = _timed(lambda: dev.__setitem__(0, rt.malloc(n)))
    mapped = np.memmap(src, dtype=np.uint8, mode="r+")
    row["register input file"] = _timed(lambda: rt.register(mapped))
    row["upload (registered)"] = _timed(lambda: rt.upload_array(dev[0], mapped))
    row["unregister input file"] = _timed(lambda: rt.unregister(mapped))
    row["upload (pageable)"] = _timed(lambda: rt.upload_array(dev[0], mapped))
    out = root / "out.bin"
    fresh = [None]
    row["map new output file"] = _timed(
        lambda: fresh.__setitem__(0, np.memmap(out, dtype=np.uint8, mode="w+", shape=(n,)))
    )
    row["register new output file"] = _timed(lambda: rt.register(fresh[0]))
    row["download (registered)"] = _timed(lambda: rt.download_into(fresh[0], dev[0]))
    row["download again (registered)"] = _timed(lambda: rt.download_into(fresh[0], dev[0]))
    row["unregister output file"] = _timed(lambda: rt.unregister(fresh[0]))
    row["download (pageable, pages present)"] = _timed(lambda: rt.download_into(fresh[0], dev[0]))
    del fresh[0]
    os.unlink(out)
    plain = [np.memmap(out, dtype=np.uint8, mode="w+", shape=(n,))]
    row["download (pageable, new file)"] = _timed(lambda: rt.download_into(plain[0], dev[0]))
    del plain[0]
    os.unlink(out)
    host = np.empty(n, np.uint8)
    row["download (pageable, anonymous)"] = _timed(lambda: rt.download_into(host, dev[0]))
    row["read file (numpy sum)"] = _timed(lambda: np.memmap(src, dtype=np.uint8).sum())
    row["cudaFree"] = _timed(lambda: rt.free(dev[0]))
    os.unlink(src)
    return row


def main() -> None:
    out = Path(sys.argv[1])
    sizes = [float(s) for s in sys.argv[2:]] or [0.25, 1.0, 4.0]
    rt = CudaRuntime()
    rt.set_device(0)
    rows = []
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        for gib in sizes:
            rows.append(probe(rt, Path(tmp), gib))
            print(json.dumps(rows[-1]), flush=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
