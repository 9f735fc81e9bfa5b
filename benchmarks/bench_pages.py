"""What writing a file costs in fresh pages against recycled ones, on this machine.

A run writes its capture files into pages the kernel hands out. On some virtual machines a
page the guest has not touched lately (never, or since its hypervisor took it back: free
page reporting, ballooning) costs a fault in the host and the page's zeroing there on
first use, many times the copy itself; a page the guest freed a moment ago does not. This
benchmark writes files of one buffer, in one process, measured in CPU seconds:

* **fresh**: into a first folder, then a second one, both kept (pages the run has not
  used before);
* **recycled**: into a third folder after deleting the first (the pages just freed).

It prints ``fresh / recycled = N``: about 1-2 on a machine whose memory is backed up front,
and far more where first touch is dear. anpred's capture files are such writes (see "End
to end" in docs/benchmarks.md), so a large N there means its capture-writing line
overstates what the same run costs on a machine without that behaviour. Run::

    python benchmarks/bench_pages.py            # 2 GB per folder, in a temporary folder
    python benchmarks/bench_pages.py --mb 64    # CI smoke
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

#: Bytes of the buffer each file holds (several files make a folder's megabytes).
FILE_BYTES = 16 << 20


def write_folder(folder: Path, files: int, buffer: np.ndarray) -> float:
    """Write ``files`` files of ``buffer`` into ``folder``; return the CPU seconds taken."""
    folder.mkdir(parents=True)
    began = time.process_time()
    for index in range(files):
        with open(folder / f"f{index}", "wb") as file:
            file.write(memoryview(buffer))
    return time.process_time() - began


def measure(work: Path, megabytes: int) -> dict[str, float]:
    """The CPU seconds of writing ``megabytes`` into fresh pages (twice) and recycled ones."""
    files = max(1, (megabytes << 20) // FILE_BYTES)
    buffer = np.random.default_rng(0).standard_normal(FILE_BYTES // 4, dtype=np.float32)
    first = write_folder(work / "first", files, buffer)
    second = write_folder(work / "second", files, buffer)
    shutil.rmtree(work / "first")  # its pages go back to the free list, to be used next
    recycled = write_folder(work / "recycled", files, buffer)
    shutil.rmtree(work / "second")
    shutil.rmtree(work / "recycled")
    return {
        "megabytes": files * FILE_BYTES / 2**20,
        "fresh": first,
        "fresh_again": second,
        "recycled": recycled,
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=2048, help="megabytes per folder")
    parser.add_argument("--work", type=Path, help="folder to write in (default: a temp one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="anpred-bench-pages-", dir=args.work))
    try:
        result = measure(work, args.mb)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mb = result["megabytes"]
    print(f"# file writes, fresh pages against recycled ones ({mb:.0f} MB per folder)\n")
    for key in ("fresh", "fresh_again", "recycled"):
        print(f"{key}: {result[key]:.2f} CPU s ({mb / 1024 / max(result[key], 1e-9):.1f} GB/s)")
    fresh = (result["fresh"] + result["fresh_again"]) / 2
    print(f"\nfresh / recycled = {fresh / max(result['recycled'], 1e-9):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
