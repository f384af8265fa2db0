"""The workflow's configuration, checked when the workflow is parsed.

:func:`check_config` applies the defaults of ``workflow/schemas/config.schema.yaml``
and checks everything the configuration can get wrong -- unknown keys (with
the closest known key), types and ranges, the matrix and gap costs, the input
files (present, FASTA, letters that suit the matrix), the output columns and
formats, the shard count -- before any step runs.  Each problem is one short
line (no schema dump).  Warnings (no BLAST statistics for the scheme, more
shards than the database can use) come back apart.  The scoring scheme's part
(:func:`check_scheme`: it imports numpy and Biopython) can be done apart: the
Snakefile does it once the warm process has started.
"""

from __future__ import annotations

import difflib
import gzip
import os
import zlib
from dataclasses import dataclass, field

from .errors import InputError
from .io.gzipped import DECOMPRESS_ERRORS, is_gzip

#: Bytes read from the start of the database to count its records.
SAMPLE_BYTES = 8 << 20


@dataclass
class ConfigCheck:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The residues read at the head of each input file (``queries``, ``database``;
    #: None where it could not be read), for :func:`check_scheme`'s letters.
    heads: dict = field(default_factory=dict)

    def __bool__(self) -> bool:  # true when the config is usable
        return not self.problems


def _schema(schema_path) -> dict:
    """The configuration schema, read with libyaml's safe loader where PyYAML has it
    (1.4 ms against 13 ms for PyYAML's own on the 2-core VM: this runs at every
    workflow's parse, on the path to its first job); the same mapping either way."""
    import yaml

    with open(schema_path) as fh:
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _type_ok(value, spec) -> bool:
    types = spec if isinstance(spec, list) else [spec]
    for t in types:
        if t == "null" and value is None:
            return True
        if t == "string" and isinstance(value, str):
            return True
        if t == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if t == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if t == "boolean" and isinstance(value, bool):
            return True
        if t == "array" and isinstance(value, list):
            return True
    return False


def _peek_fasta(path: str, what: str, limit: int = 200_000):
    """(problem or None, residues sample as bytes) from the start of a FASTA file."""
    try:
        opener = gzip.open if is_gzip(path) else open
        with opener(path, "rb") as fh:
            head = fh.read(limit)
    except OSError as exc:
        return f"{what} {path}: cannot read ({exc.strerror or exc})", b""
    except EOFError:
        return f"{what} {path}: truncated gzip file", b""
    except zlib.error as exc:  # the deflate stream itself is damaged
        return f"{what} {path}: corrupt gzip data ({exc})", b""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    text = head.lstrip()
    if not text:
        return f"{what} {path}: the file is empty", b""
    if not text.startswith(b">"):
        return f"{what} {path}: not a FASTA file (the first line does not start with '>')", b""
    lines = head.splitlines()
    if len(head) >= limit:  # the last line may be cut short
        lines = lines[:-1]
    residues = b"".join(line.strip() for line in lines if not line.startswith(b">"))
    return None, residues.upper()


def check_config(config: dict, schema_path, workdir: str = ".", scheme: bool = True) -> ConfigCheck:
    """Fill in defaults (in place) and check ``config``; see the module doc.
    ``scheme`` False: all but :func:`check_scheme` (the matrix, gap costs and the
    inputs' letters: numpy and Biopython imported), which the caller does apart (the
    Snakefile, once the warm process has started)."""
    check = ConfigCheck()
    schema = _schema(schema_path)
    props = schema.get("properties", {})
    for key in list(config):
        if key not in props:
            close = difflib.get_close_matches(str(key), list(props), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            check.problems.append(f"unknown key '{key}'{hint}; keys: {', '.join(props)}")
    unknown = len(check.problems)
    for key in schema.get("required", []):
        if key not in config:
            check.problems.append(f"'{key}' is required: the path of the {key} FASTA file")
    for key, spec in props.items():
        if key not in config and "default" in spec:
            config[key] = spec["default"]
        if key not in config:
            continue
        value = config[key]
        if not _type_ok(value, spec.get("type", "string")):
            want = spec.get("type")
            check.problems.append(
                f"'{key}' must be {want if isinstance(want, str) else ' or '.join(want)}, "
                f"got {value!r}"
            )
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in spec and value < spec["minimum"]:
                check.problems.append(f"'{key}' must be at least {spec['minimum']}, got {value}")
            if "exclusiveMinimum" in spec and not value > spec["exclusiveMinimum"]:
                check.problems.append(
                    f"'{key}' must be greater than {spec['exclusiveMinimum']}, got {value}"
                )
        if "enum" in spec and value not in spec["enum"]:
            check.problems.append(
                f"'{key}' must be one of {', '.join(spec['enum'])}, got {value!r}"
            )
        if spec.get("type") == "array":
            allowed = spec.get("items", {}).get("enum")
            bad = [v for v in value if allowed and v not in allowed]
            if bad:
                check.problems.append(
                    f"'{key}': unknown {', '.join(map(str, bad))}; choose from {', '.join(allowed)}"
                )
        if (
            spec.get("type") == "string"
            and spec.get("minLength")
            and isinstance(value, str)
            and len(value) < spec["minLength"]
        ):
            check.problems.append(f"'{key}' must not be empty")
    if len(check.problems) > unknown:  # wrong types: the checks below would only repeat them
        return check
    at = (len(check.problems), len(check.warnings))  # the scheme's part goes here (below)
    # output columns
    try:
        from .io.fieldnames import parse_columns

        parse_columns(config["columns"])
    except InputError as exc:
        check.problems.append(f"'columns': {exc}")
    # input files
    for key, what in (("queries", "queries"), ("database", "database")):
        path = os.path.join(workdir, config[key])
        if not os.path.exists(path):
            check.problems.append(
                f"'{key}': {config[key]}: file not found (relative to {os.path.abspath(workdir)})"
            )
            continue
        if os.path.isdir(path):
            check.problems.append(f"'{key}': {config[key]} is a directory, not a FASTA file")
            continue
        problem, residues = _peek_fasta(path, what)
        check.heads[key] = None if problem else residues
        if problem:
            check.problems.append(problem)
    if scheme:  # with the heads just read
        more = check_scheme(config, workdir, check.heads)
        check.problems[at[0] : at[0]] = more.problems
        check.warnings[at[1] : at[1]] = more.warnings
    per_job = config.get("shards_per_job")
    if isinstance(per_job, str) and per_job != "auto":
        check.problems.append(f"'shards_per_job' must be auto or an integer >= 1, got {per_job!r}")
    # the shard count against the database's size
    db = os.path.join(workdir, config["database"])
    if len(check.problems) == unknown and os.path.isfile(db):
        n, exact = count_records(db)
        least = config["min_shard_sequences"]
        if n / config["shards"] < least:
            capped = max(1, n // least)
            check.warnings.append(
                f"shards: {config['shards']} shards of a database of {'' if exact else 'about '}"
                f"{n:,} sequences would hold fewer than min_shard_sequences ({least}) each, "
                f"and every scoring job costs seconds of start-up; using {capped} shards"
            )
            config["shards"] = capped
    return check


def check_scheme(config: dict, workdir: str = ".", heads: dict | None = None) -> ConfigCheck:
    """The scoring scheme of a ``config`` that :func:`check_config` filled in: the
    matrix and gap costs (a warning where BLAST publishes no statistics for them),
    and the letters of the head of each input file (those it could read) against
    the matrix.  ``heads``: those heads as :func:`check_config` read them
    (:attr:`ConfigCheck.heads`), else they are read here."""
    from .scoring import ScoringScheme

    check = ConfigCheck()
    try:
        scheme = ScoringScheme(config["matrix"], config["gap_open"], config["gap_extend"])
    except InputError as exc:
        check.problems.append(str(exc))
        return check
    from . import stats

    if stats.lookup(scheme.matrix_name, scheme.gap_open, scheme.gap_extend) is None:
        check.warnings.append(
            stats.no_statistics_message(scheme.matrix_name, scheme.gap_open, scheme.gap_extend)
        )
    for key, what in (("queries", "queries"), ("database", "database")):
        if heads is not None and key in heads:
            residues = heads[key]
        else:
            path = os.path.join(workdir, config[key])
            if not os.path.isfile(path):
                continue  # (check_config says so)
            problem, residues = _peek_fasta(path, what)
            residues = None if problem else residues
        if residues is None or len(residues) < 50:
            continue
        from .sequences import SequenceSet

        seqs = SequenceSet.from_sequences(["sample"], [bytes(residues)])
        try:
            scheme.check_letters(seqs, f"{what} {config[key]}")
        except InputError as exc:
            check.problems.append(str(exc))
    return check


def count_records(path, sample: int = SAMPLE_BYTES) -> tuple[int, bool]:
    """(number of FASTA records, exact?): counted in the first ``sample`` bytes
    (uncompressed), extrapolated by the file size beyond that."""
    gz = is_gzip(path)
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(sample + 1)
            rest = fh.read(1) if len(head) > sample else b""
    except DECOMPRESS_ERRORS:
        return 1, False
    n = head.count(b"\n>") + head.startswith(b">")
    if len(head) <= sample and not rest:
        return max(n, 1), True
    size = os.path.getsize(path)
    ratio = (len(head) / max(1, _compressed_offset(path, len(head)))) if gz else 1.0
    return max(1, int(n * size * ratio / len(head))), False


def _compressed_offset(path, uncompressed: int) -> int:
    """Compressed bytes behind the first ``uncompressed`` bytes of a gzip file."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    used = out = 0
    with open(path, "rb") as fh:
        while out < uncompressed:
            chunk = fh.read(1 << 16)
            if not chunk:
                break
            try:
                out += len(d.decompress(chunk))
            except zlib.error:  # damaged further on: what was read is the estimate's base
                break
            used += len(chunk)
    return used


def snakemake_path(path: str) -> str:
    """A path as a Snakemake input/output pattern: braces doubled, so that
    ``db{1}.fasta`` is a file name, not a wildcard."""
    return str(path).replace("{", "{{").replace("}", "}}")
