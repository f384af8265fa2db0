"""The receipt step (rule ``database_source``): a database file's receipt.

Standard library only: the job runs before anything else, and each import
is time on the way to the first result.
"""

from __future__ import annotations

import os
import time

from ..io.atomic import write_json
from ..logs import get_logger

log = get_logger(__name__)


def write_source_receipt(database, out_path) -> dict:
    """Write ``out_path``, the receipt of a database file that the workflow found
    changed: its path, size and modification time, and when the receipt was
    written, so that its content differs from any earlier receipt's.

    The workflow's shard step takes this receipt as its input instead of the
    database (workflow/rules/shard_db.smk): Snakemake checksums a job's inputs
    again for each of the job's outputs, and the shard step has several.
    """
    st = os.stat(database)
    receipt = {
        "database": os.path.abspath(os.fspath(database)),
        "bytes": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "written_ns": time.time_ns(),
    }
    write_json(out_path, receipt)
    log.info(f"{receipt['database']}: {st.st_size:,} bytes, new or changed: {out_path}")
    return receipt
