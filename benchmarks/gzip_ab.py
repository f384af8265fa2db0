"""Gzip decompression by ISA-L against zlib: the parse-time cut-short check and shard_db
on a gzip database, in one process (RESULTS-shard_db.md).

    python benchmarks/gzip_ab.py zlib|isal DB.fasta.gz [--shards 4]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
import time

from swgpu_tools.io import gzipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("library", choices=["zlib", "isal"])
    ap.add_argument("database", help="a gzip FASTA file")
    ap.add_argument("--shards", type=int, default=4)
    args = ap.parse_args()
    if args.library == "zlib":  # ISA-L switched off in the module
        gzipped._isal_zlib = gzipped._igzip = None
    elif not gzipped.FAST:
        raise SystemExit("isal is not installed")
    from swgpu_tools.steps.receipt import check_complete
    from swgpu_tools.steps.shard_db import shard_database

    with gzip.open(args.database, "rb") as fh:
        size = sum(len(b) for b in iter(lambda: fh.read(1 << 24), b""))
    t = time.perf_counter()
    check_complete(args.database)
    check_s = time.perf_counter() - t
    out = tempfile.mkdtemp(prefix="gzip-ab-")
    try:
        t = time.perf_counter()
        shard_database(args.database, out, args.shards)
        shard_s = time.perf_counter() - t
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(
        f"{args.library}: check_complete {check_s:.2f} s; shard_db {shard_s:.2f} s "
        f"({size / shard_s / 1e6:.0f} MB/s of FASTA)"
    )


if __name__ == "__main__":
    main()
