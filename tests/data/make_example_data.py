"""Regenerate the bundled example (swgpu_tools/data/) from ../shared/data.

    python tests/data/make_example_data.py [SHARED_DATA_DIR]

Example database: 3,000 real UniProt entries of uniprot20k: the 40 best SSEARCH
hits of each example query plus a deterministic random sample of the rest.
Example queries: 5 of the 7 oracle queries (59 to 991 residues).
"""

import gzip
import os
import random
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "swgpu_tools", "data")
N_ENTRIES = 3000
QUERY_LENGTHS = (59, 149, 300, 493, 991)


def records(handle):
    header, lines = None, []
    for line in handle:
        if line.startswith(">"):
            if header is not None:
                yield header, "".join(lines)
            header, lines = line.rstrip("\n"), []
        else:
            lines.append(line.strip())
    if header is not None:
        yield header, "".join(lines)


def accession(header):
    parts = header[1:].split("|")
    return parts[1] if len(parts) > 2 else header[1:].split()[0]


def main(shared):
    with open(os.path.join(shared, "oracle_queries.fasta")) as fh:
        queries = [(h, s) for h, s in records(fh) if len(s) in QUERY_LENGTHS]
    qids = {accession(h) for h, _ in queries}
    oracle = pd.read_csv(os.path.join(shared, "oracle_ssearch36_uniprot20k.tsv.gz"), sep="\t")
    oracle = oracle[oracle["query"].isin(qids)]
    best = oracle.sort_values("sw_score", ascending=False).groupby("query").head(40)
    keep = set(best["target"])
    with gzip.open(os.path.join(shared, "uniprot20k.fasta.gz"), "rt") as fh:
        db = list(records(fh))
    rng = random.Random(20261122)
    rest = [accession(h) for h, _ in db if accession(h) not in keep]
    keep |= set(rng.sample(rest, N_ENTRIES - len(keep)))
    os.makedirs(OUT, exist_ok=True)
    with gzip.GzipFile(os.path.join(OUT, "example_database.fasta.gz"), "wb", mtime=0) as fh:
        for h, s in db:
            if accession(h) in keep:
                fh.write(
                    (
                        h + "\n" + "\n".join(s[i : i + 60] for i in range(0, len(s), 60)) + "\n"
                    ).encode()
                )
    with open(os.path.join(OUT, "example_queries.fasta"), "w") as fh:
        for h, s in queries:
            fh.write(h + "\n" + "\n".join(s[i : i + 60] for i in range(0, len(s), 60)) + "\n")
    print(f"{len(keep)} database entries, {len(queries)} queries -> {OUT}")


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "data")
    )
