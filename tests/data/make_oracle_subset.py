"""Regenerate the SSEARCH oracle subset used by the tests (deterministic).

Reads ../shared/data (or the folder given as the first argument) and writes,
next to this script:

* ``oracle_queries.fasta``          the 7 oracle queries (copied as is);
* ``oracle_db.fasta.gz``            a subset of uniprot20k: every query's top-50
                                    SSEARCH hits plus a seeded random sample,
                                    in the order of the original file;
* ``oracle_ssearch36_subset.tsv.gz`` SSEARCH's rows for every (query, subset
                                    entry) pair: query and target as accessions
                                    (``tr|ACC|NAME`` -> ``ACC``, as
                                    :func:`swgpu_tools.fasta.parse_id`), slen,
                                    sw_score, pident, alen and the 1-based
                                    inclusive coordinates.

Usage: python tests/data/make_oracle_subset.py [SHARED_DATA_DIR]
"""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TOP_PER_QUERY = 50
TOTAL = 2000
SEED = 20240611


def accession(name: str) -> str:
    parts = name.split("|")
    if len(parts) >= 3 and parts[0] in ("sp", "tr"):
        return parts[1]
    return name.split()[0]


def write_gzip(path: Path, text: str) -> None:
    # mtime=0 and no file name in the header: identical bytes on every run
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(text.encode("ascii"))


def read_records(path: Path):
    """(accession, header line, sequence lines) per record, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    records = []
    with opener(path, "rt") as fh:
        header, lines = None, []
        for line in fh:
            if line.startswith(">"):
                if header is not None:
                    records.append((accession(header[1:]), header, lines))
                header, lines = line, []
            else:
                lines.append(line)
        if header is not None:
            records.append((accession(header[1:]), header, lines))
    return records


def main(shared: Path) -> None:
    import pandas as pd

    oracle = pd.read_csv(shared / "oracle_ssearch36_uniprot20k.tsv.gz", sep="\t", dtype=str)
    oracle["query"] = oracle["query"].map(accession)
    oracle["target"] = oracle["target"].map(accession)
    # A few rows of the shared file are garbled: targets whose description holds
    # "(digits)" were split inside the description, shifting the columns
    # ("2  variant  OS=Vipera  138)  24 ...").  Their entries are left out.
    numeric = ["slen", "sw_score", "alen", "qstart", "qend", "sstart", "send"]
    good = oracle[numeric].apply(lambda c: c.str.fullmatch(r"\d+")).all(axis=1)
    garbled = sorted(set(oracle.loc[~good, "target"]))
    oracle = oracle[good & ~oracle["target"].isin(garbled)].copy()
    for col in numeric:
        oracle[col] = oracle[col].astype(np.int64)
    oracle["pident"] = oracle["pident"].astype(float)
    db = read_records(shared / "uniprot20k.fasta.gz")
    ids = [acc for acc, _, _ in db]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate accessions in the database")

    chosen: set[str] = set()
    for _, rows in oracle.groupby("query", sort=True):
        rows = rows.sort_values(["sw_score", "target"], ascending=[False, True], kind="stable")
        chosen.update(rows["target"].head(TOP_PER_QUERY))
    # the longest entries exercise wide lanes and long subjects
    lengths = np.array([sum(len(s.strip()) for s in lines) for _, _, lines in db])
    chosen.update(ids[i] for i in np.argsort(-lengths, kind="stable")[:10])
    rng = np.random.default_rng(SEED)
    rest = [i for i in range(len(ids)) if ids[i] not in chosen and ids[i] not in garbled]
    extra = rng.choice(len(rest), size=max(0, TOTAL - len(chosen)), replace=False)
    chosen.update(ids[rest[i]] for i in extra)

    out = io.StringIO()
    for acc, header, lines in db:
        if acc in chosen:
            out.write(header)
            out.writelines(lines)
    write_gzip(HERE / "oracle_db.fasta.gz", out.getvalue())

    rows = oracle[oracle["target"].isin(chosen)].sort_values(
        ["query", "sw_score", "target"], ascending=[True, False, True], kind="stable"
    )
    cols = [
        "query",
        "target",
        "slen",
        "sw_score",
        "pident",
        "alen",
        "qstart",
        "qend",
        "sstart",
        "send",
    ]
    write_gzip(
        HERE / "oracle_ssearch36_subset.tsv.gz",
        rows[cols].to_csv(sep="\t", index=False, lineterminator="\n"),
    )

    (HERE / "oracle_queries.fasta").write_bytes((shared / "oracle_queries.fasta").read_bytes())
    print(
        f"{len(chosen)} database entries, {len(rows)} oracle rows; "
        f"left out {len(garbled)} entries with garbled oracle rows: {' '.join(garbled)}"
    )


if __name__ == "__main__":
    default = HERE.parent.parent.parent / "shared" / "data"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
