#!/usr/bin/env python3
"""Markdown tables of a CUDASW++ 4.0 vs swgpu run (benchmarks/cudasw_compare_run.sh).

    python3 benchmarks/cudasw_compare_table.py OUT_DIR [--md tables.md] [--json summary.json] \
        [--peak-per-query]

OUT_DIR is the run's $OUT: ``run_info.txt`` and one folder per database (``bench200m``,
``peak_<length>``), each with ``meta.txt``, CUDASW++'s console logs and result files
(``cudasw_<mode>.log`` / ``.tsv``, ``cudasw_pseudo_<mode>.*`` for its built-in pseudo
database) and gpu_bench.py's ``swgpu.json``.  Works offline on saved runs.

What is compared: GCUPS = query length x database residues / seconds / 1e9, the
database already resident on the GPU for both tools.  Overall: all queries' cells
over the wall clock of the whole query set (CUDASW++: its "Total time" line, a GPU
timer around the whole query loop; swgpu: gpu_bench.py's overall figure, median of
its repeats after a warm-up pass).  CUDASW++ reads the query file CUDASW_PASSES times
in one process; the passes after the first are reported (median), since the first
pays its warm-up.  Per query: CUDASW++'s own scan time of that query; swgpu's per-query
time is an attribution (see gpu_bench.py): with qp2, the query's share of its tiles' GPU
time by real rows; otherwise the time between consecutive queries' hits with several
queries in flight.  Top scores: each tool's best score per query, which
must agree when both score BLOSUM62 with BLAST gap open 11, extend 1.

The CUDASW++ log formats parsed here are those its src/main.cu prints with --verbose
("Processing query N ... Done. Scan time: S s, G GCUPS", "Total time: S s, G GCUPS")
and with --tsv (columns "Query number, Query length, Query header, Result number,
Result score, Reference length, Reference header, Reference ID in DB").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
RE_QUERY = re.compile(
    rf"Processing query (\d+) \.\.\. Done\. Scan time: ({FLOAT}) s, ({FLOAT}) GCUPS"
)
RE_TOTAL = re.compile(rf"Total time: ({FLOAT}) s, ({FLOAT}) GCUPS")
RE_FILE = re.compile(r"Processing query file (.*)$")
RE_DB = re.compile(r"^(\d+) sequences, (\d+) characters\s*$")
RE_LEN = re.compile(r"^Min length (\d+), max length (\d+), avg length (\d+)")
RE_TIMER = re.compile(rf"# elapsed time \(([^)]*)\): ({FLOAT})s")
OPTION_KEYS = (
    "gop",
    "gex",
    "blosum",
    "numTopOutputs",
    "singlePassType",
    "manyPassType_small",
    "manyPassType_large",
    "overflowType",
)
RE_OPTION = re.compile(r"^(" + "|".join(OPTION_KEYS) + r"): (.*?)\s*$")
RE_PSEUDO = re.compile(r"Using built-in pseudo db with (\d+) sequences of length (\d+)")
ERROR_MARKS = ("CUDA error", "terminate called", "what():", "Segmentation fault", "Aborted")


def read_keyvalues(path: str) -> dict:
    out = {}
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                if ": " in line:
                    k, v = line.rstrip("\n").split(": ", 1)
                    out[k.strip()] = v.strip()
    return out


def parse_cudasw_log(text: str) -> dict:
    """Options, database size, per-pass per-query times and totals from CUDASW++'s console."""
    res = {"options": {}, "passes": [], "errors": [], "timers": {}}
    for line in text.splitlines():
        m = RE_OPTION.match(line)
        if m and m.group(1) not in res["options"]:
            res["options"][m.group(1)] = m.group(2)
            continue
        m = RE_PSEUDO.search(line)
        if m:
            res["pseudodb"] = {"sequences": int(m.group(1)), "length": int(m.group(2))}
        m = RE_DB.match(line)
        if m:
            res["db_sequences"], res["db_characters"] = int(m.group(1)), int(m.group(2))
        m = RE_LEN.match(line)
        if m:
            res["db_min_length"], res["db_max_length"] = int(m.group(1)), int(m.group(2))
        m = RE_TIMER.search(line)
        if m:
            res["timers"][m.group(1)] = float(m.group(2))
        m = RE_FILE.search(line)
        if m:
            res["passes"].append({"file": m.group(1).strip(), "queries": {}, "total": None})
            continue
        m = RE_QUERY.search(line)
        if m:
            if not res["passes"]:
                res["passes"].append({"file": None, "queries": {}, "total": None})
            res["passes"][-1]["queries"][int(m.group(1))] = {
                "seconds": float(m.group(2)),
                "gcups": float(m.group(3)),
            }
        m = RE_TOTAL.search(line)
        if m and res["passes"]:
            res["passes"][-1]["total"] = {"seconds": float(m.group(1)), "gcups": float(m.group(2))}
        if any(mark in line for mark in ERROR_MARKS):
            res["errors"].append(line.strip())
    return res


def parse_cudasw_tsv(text: str) -> list[dict]:
    """Per pass, per query number: {length, header, top, top_subject} from CUDASW++'s --tsv."""
    passes: list[dict] = []
    prev = None
    for line in text.splitlines():
        f = line.rstrip("\n").split("\t")
        if len(f) < 8 or not f[0].lstrip("-").isdigit():
            continue  # header line or junk
        try:
            q, qlen, rnum, score = int(f[0]), int(f[1]), int(f[3]), int(f[4])
        except ValueError:
            continue
        if not passes or (prev is not None and (q, rnum) <= prev):
            passes.append({})
        prev = (q, rnum)
        cur = passes[-1].get(q)
        if cur is None or score > cur["top"]:
            passes[-1][q] = {
                "length": qlen,
                "header": f[2],
                "top": score,
                "top_subject": f[6].split()[0] if f[6].split() else f[6],
            }
    return passes


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize_cudasw(log: dict, tsv: list[dict]) -> dict:
    """The passes after the first (median) or the only one."""
    passes = log["passes"]
    used = passes[1:] if len(passes) > 1 else passes
    nq = max((len(p["queries"]) for p in passes), default=0)
    queries = []
    for qi in range(nq):
        secs = [p["queries"][qi]["seconds"] for p in used if qi in p["queries"]]
        gcups = [p["queries"][qi]["gcups"] for p in used if qi in p["queries"]]
        top = tsv[-1].get(qi) if tsv else None
        queries.append(
            {
                "seconds": _median(secs),
                "gcups": _median(gcups),
                "first_pass_gcups": passes[0]["queries"].get(qi, {}).get("gcups"),
                "length": top["length"] if top else None,
                "query": top["header"].split()[0] if top and top["header"].split() else None,
                "top": top["top"] if top else None,
                "top_subject": top["top_subject"] if top else None,
                "tops_all_passes": [t[qi]["top"] for t in tsv if qi in t],
            }
        )
    # CUDASW++'s "Total time" lines are cumulative over the query file (pass k's line
    # gives the seconds since the first query, with one pass's cells): a pass's own time
    # is the difference of consecutive lines, its cells those of the first pass
    all_totals = [p["total"] for p in passes]
    own = []
    if all_totals and all(all_totals):
        cells = all_totals[0]["seconds"] * all_totals[0]["gcups"]
        prev = 0.0
        for k, t in enumerate(all_totals):
            dt = t["seconds"] - prev
            prev = t["seconds"]
            if (len(passes) == 1 or k > 0) and dt > 0:
                own.append({"seconds": dt, "gcups": cells / dt})
    return {
        "passes": len(passes),
        "passes_reported": len(used),
        "total_s": _median([t["seconds"] for t in own]),
        "overall_gcups": _median([t["gcups"] for t in own]),
        "first_pass_overall_gcups": passes[0]["total"]["gcups"]
        if passes and passes[0]["total"]
        else None,
        "queries": queries,
        "options": log["options"],
        "db_sequences": log.get("db_sequences"),
        "db_characters": log.get("db_characters"),
        "pseudodb": log.get("pseudodb"),
        "timers": log["timers"],
        "errors": log["errors"][:5],
    }


def summarize_swgpu(data: dict) -> dict:
    v = data["variants"][0] if data.get("variants") else data
    queries = []
    for r in v.get("queries", []):
        top = r.get("top") or "-"
        subject, _, score = top.rpartition("=")
        queries.append(
            {
                "query": r["query"],
                "length": r["length"],
                "seconds": r["scan_s"],
                "gcups": r["gcups"],
                "top": int(score) if score.lstrip("-").isdigit() else None,
                "top_subject": subject or None,
                "rescored": r.get("rescored"),
            }
        )
    return {
        "total_s": v.get("total_scan_s"),
        "overall_gcups": v.get("overall_gcups"),
        "mode": v.get("mode"),
        "residues": v.get("residues"),
        "sequences": v.get("sequences"),
        "upload_s": v.get("upload_s"),
        "queries": queries,
        "commit": data.get("commit"),
    }


def load_dir(d: str) -> dict:
    """Every tool run found in one database folder."""
    meta = read_keyvalues(os.path.join(d, "meta.txt"))
    runs = {}
    for name in sorted(os.listdir(d)):
        if name.startswith("cudasw_") and name.endswith(".log") and name != "cudasw_makedb.log":
            tag = name[: -len(".log")]
            with open(os.path.join(d, name), errors="replace") as fh:
                log = parse_cudasw_log(fh.read())
            tsv_path = os.path.join(d, tag + ".tsv")
            tsv = []
            if os.path.exists(tsv_path):
                with open(tsv_path, errors="replace") as fh:
                    tsv = parse_cudasw_tsv(fh.read())
            s = summarize_cudasw(log, tsv)
            s["rc"] = meta.get(f"{tag}_rc")
            if s["rc"] not in (None, "0") and not s["errors"]:
                s["errors"] = [_last_line(os.path.join(d, name))]
            runs[tag] = s
    for name in sorted(os.listdir(d)):  # swgpu in a forced kernel mode (SWGPU_MODES)
        if name.startswith("swgpu_") and name.endswith(".json"):
            with open(os.path.join(d, name)) as fh:
                runs[name[: -len(".json")]] = summarize_swgpu(json.load(fh))
    sw = os.path.join(d, "swgpu.json")
    if os.path.exists(sw):
        with open(sw) as fh:
            runs["swgpu"] = summarize_swgpu(json.load(fh))
    elif os.path.exists(os.path.join(d, "swgpu.log")):
        runs["swgpu"] = {
            "failed": True,
            "rc": meta.get("swgpu_rc"),
            "queries": [],
            "errors": [_last_line(os.path.join(d, "swgpu.log"))],
        }
    return {"meta": meta, "runs": runs}


def _last_line(path: str) -> str:
    """The last line of a log that says something (":" alone or blank lines skipped)."""
    with open(path, errors="replace") as fh:
        lines = [x.strip() for x in fh if x.strip().strip(":")]
    return lines[-1][:300] if lines else "(empty log)"


def label(tag: str) -> str:
    if tag == "swgpu":
        return "swgpu"
    if tag.startswith("swgpu_"):
        return f"swgpu {tag[len('swgpu_') :]}"
    if tag.startswith("cudasw_pseudo_"):
        return f"CUDASW++ {tag[len('cudasw_pseudo_') :]} (--pseudodb)"
    return f"CUDASW++ {tag[len('cudasw_') :]}"


def fmt(x, digits=0) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def order(runs: dict) -> list[str]:
    cud = [t for t in runs if t.startswith("cudasw_") and not t.startswith("cudasw_pseudo_")]
    pseudo = [t for t in runs if t.startswith("cudasw_pseudo_")]
    key = {"cudasw_dpx": 0, "cudasw_half2": 1}
    cud.sort(key=lambda t: (key.get(t, 9), t))
    forced = sorted(t for t in runs if t.startswith("swgpu_"))
    return cud + sorted(pseudo) + forced + (["swgpu"] if "swgpu" in runs else [])


def score_check(runs: dict, ref: str = "swgpu") -> list[str]:
    """One line per CUDASW++ run: how many top scores agree with swgpu's."""
    lines = []
    if ref not in runs or not runs[ref].get("queries"):
        return lines
    mine = [q["top"] for q in runs[ref]["queries"]]
    for tag in order(runs):
        if tag == ref or not runs[tag].get("queries"):
            continue
        theirs = [q["top"] for q in runs[tag]["queries"]]
        pairs = [(a, b) for a, b in zip(mine, theirs) if a is not None and b is not None]
        same = sum(a == b for a, b in pairs)
        diff = [
            (i, a, b) for i, (a, b) in enumerate(zip(mine, theirs)) if a != b and None not in (a, b)
        ]
        line = f"{label(tag)}: top score equal to swgpu's on {same}/{len(pairs)} queries"
        if diff:
            shown = ", ".join(f"#{i + 1}: swgpu {a} vs {b}" for i, a, b in diff[:4])
            line += f" (differ: {shown}{', ...' if len(diff) > 4 else ''})"
            if all(b > a for _, a, b in diff):
                line += (
                    "; CUDASW++ always higher: its gap penalties are lighter than BLAST 11/1 "
                    "(BLAST 10/1 is CUDASW++'s gop -11 gex -1; was --gop/--gex forwarded?)"
                )
        gop = runs[tag].get("options", {}).get("gop")
        gex = runs[tag].get("options", {}).get("gex")
        if gop is not None:
            line += f" [its options: gop {gop}, gex {gex}]"
        lines.append(line)
    return lines


def per_query_table(name: str, db: dict) -> list[str]:
    runs = db["runs"]
    tags = order(runs)
    sw = runs.get("swgpu", {})
    # the ratio is to CUDASW++ on the same database: its --pseudodb runs are left out
    cud = [t for t in tags if t.startswith("cudasw_") and "pseudo" not in t]
    # swgpu's query names (the FASTA id), else the first word of CUDASW++'s header
    base = next((runs[t]["queries"] for t in tags[::-1] if runs[t].get("queries")), [])
    out = [f"### {name}: per query", ""]
    head = ["#", "query", "length"] + [f"{label(t)} GCUPS" for t in tags]
    if sw.get("queries") and cud:
        head.append("swgpu ÷ best CUDASW++")
    head += [f"top: {label(t)}" for t in tags] + ["tops agree"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for i, q0 in enumerate(base):
        row = [str(i + 1), q0.get("query") or "?", fmt(q0.get("length"))]
        gc = {}
        for t in tags:
            qs = runs[t].get("queries", [])
            gc[t] = qs[i]["gcups"] if i < len(qs) else None
            row.append(fmt(gc[t]))
        if sw.get("queries") and cud:
            best = max((gc[t] for t in cud if gc[t]), default=None)
            row.append(f"{gc['swgpu'] / best:.2f}" if best and gc.get("swgpu") else "–")
        tops = []
        for t in tags:
            qs = runs[t].get("queries", [])
            tops.append(qs[i]["top"] if i < len(qs) else None)
            row.append(fmt(tops[-1]))
        known = [x for t, x in zip(tags, tops) if x is not None and "pseudo" not in t]
        row.append("–" if len(known) < 2 else ("yes" if len(set(known)) == 1 else "**no**"))
        out.append("| " + " | ".join(row) + " |")
    # overall row
    row = ["", "**all (wall clock)**", ""]
    for t in tags:
        r = runs[t]
        row.append(
            f"**{fmt(r.get('overall_gcups'))}** ({fmt(r.get('total_s'), 3)} s)"
            if r.get("overall_gcups")
            else "–"
        )
    if sw.get("queries") and cud:
        best = max((runs[t].get("overall_gcups") or 0 for t in cud), default=0)
        row.append(
            f"**{sw['overall_gcups'] / best:.2f}**" if best and sw.get("overall_gcups") else "–"
        )
    row += [""] * (len(tags) + 1)
    out.append("| " + " | ".join(row) + " |")
    return out


def peak_table(peaks: list[tuple[int, dict]]) -> list[str]:
    tags: list[str] = []
    for _, db in peaks:
        for t in order(db["runs"]):
            if t not in tags:
                tags.append(t)
    tags = [t for t in tags if t != "swgpu"] + (["swgpu"] if "swgpu" in tags else [])
    # the ratio is to CUDASW++ on the same database: its --pseudodb runs are left out
    cud = [t for t in tags if t.startswith("cudasw_") and "pseudo" not in t]
    head = ["length", "sequences", "residues"] + [label(t) for t in tags]
    if "swgpu" in tags and cud:
        head.append("swgpu ÷ best CUDASW++")
    head.append("tops agree")
    out = [
        "### peak setting: overall GCUPS (min–max per query)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for L, db in peaks:
        runs = db["runs"]
        sw = runs.get("swgpu", {})
        seqs = sw.get("sequences") or _int(db["meta"].get("sequences"))
        res = sw.get("residues") or (seqs * L if seqs else None)
        row = [str(L), fmt(seqs), fmt(res)]
        for t in tags:
            r = runs.get(t)
            if not r or not r.get("overall_gcups"):
                row.append("–" if not r else f"failed (rc {r.get('rc')})")
                continue
            per = [q["gcups"] for q in r.get("queries", []) if q.get("gcups")]
            span = f" ({min(per):,.0f}–{max(per):,.0f})" if per else ""
            row.append(f"{r['overall_gcups']:,.0f}{span}")
        if "swgpu" in tags and cud:
            best = max((runs[t].get("overall_gcups") or 0 for t in cud if t in runs), default=0)
            row.append(
                f"{sw['overall_gcups'] / best:.2f}" if best and sw.get("overall_gcups") else "–"
            )
        # CUDASW++'s --pseudodb is another database (one sequence repeated): other scores
        row.append(tops_agree([runs[t] for t in tags if t in runs and "pseudo" not in t]))
        out.append("| " + " | ".join(row) + " |")
    return out


def no_dpx_lines(dbs: dict) -> list[str]:
    """One line per database with both a swgpu h16 run and a CUDASW++ half2 run: their
    overall GCUPS and ratio (the no-DPX paths of both tools on the same GPU)."""
    out = []
    for name, db in dbs.items():
        runs = db["runs"]
        h = runs.get("swgpu_h16", {}).get("overall_gcups")
        c = runs.get("cudasw_half2", {}).get("overall_gcups")
        if h and c:
            out.append(f"* {name}: swgpu h16 {h:,.0f}, CUDASW++ half2 {c:,.0f}: {h / c:.2f}x")
    return out


def tops_agree(runs: list[dict]) -> str:
    """'yes' when, query by query, every run that has a top score for it has the same one."""
    lists = [[q.get("top") for q in r.get("queries", [])] for r in runs]
    lists = [x for x in lists if any(v is not None for v in x)]
    if len(lists) < 2:
        return "–"
    n = max(len(x) for x in lists)
    for i in range(n):
        vals = {x[i] for x in lists if i < len(x) and x[i] is not None}
        if len(vals) > 1:
            return "**no**"
    return "yes"


def _int(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def build(out_dir: str) -> tuple[str, dict]:
    info = read_keyvalues(os.path.join(out_dir, "run_info.txt"))
    dbs = {}
    for name in sorted(os.listdir(out_dir)):
        d = os.path.join(out_dir, name)
        if os.path.isdir(d) and (name == "bench200m" or name.startswith("peak_")):
            dbs[name] = load_dir(d)
    lines = ["## CUDASW++ 4.0 vs swgpu", ""]
    for k in (
        "device",
        "cudasw_commit",
        "nvcc",
        "build_s",
        "cudasw_gap",
        "cudasw_passes",
        "peak_size",
    ):
        if k in info:
            lines.append(f"* {k}: {info[k]}")
    sw_commit = next(
        (db["runs"]["swgpu"].get("commit") for db in dbs.values() if "swgpu" in db["runs"]), None
    )
    if sw_commit:
        lines.append(f"* swgpu commit: {sw_commit}")
    lines += [
        "",
        "GCUPS = query length x database residues / seconds / 1e9, database resident on the GPU. "
        "Overall: all queries over the wall clock of the whole query set. CUDASW++: its own "
        "timers, the passes over the query file after the first (warm-up). swgpu: "
        "gpu_bench.py, median of its repeats; its per-query figure is an attribution: with qp2, "
        "the query's share of its tiles' GPU time by real rows, else the time between "
        "consecutive queries' hits with queries in flight. Top: each tool's best score per "
        "query (BLOSUM62, BLAST gap open 11, extend 1 must give equal scores).",
        "",
    ]
    nodpx = no_dpx_lines(dbs)
    if nodpx:
        lines += ["### without DPX: swgpu h16 (binary16 pairs) against CUDASW++ half2", ""]
        lines += nodpx + [""]
    if "bench200m" in dbs:
        db = dbs["bench200m"]
        sw = db["runs"].get("swgpu", {})
        size = (
            f" ({fmt(sw.get('sequences'))} sequences, {fmt(sw.get('residues'))} residues)"
            if sw.get("residues")
            else ""
        )
        lines += per_query_table(f"bench200M{size}", db)
        lines += [""] + [f"* {x}" for x in score_check(db["runs"])] + [""]
    peaks = sorted(
        ((int(n.split("_", 1)[1]), db) for n, db in dbs.items() if n.startswith("peak_")),
        key=lambda x: x[0],
    )
    if peaks:
        lines += peak_table(peaks)
        lines.append("")
        for L, db in peaks:
            for x in score_check(db["runs"]):
                if "pseudodb" not in x:
                    lines.append(f"* length {L}: {x}")
        lines.append("")
    failures = []
    for n, db in dbs.items():
        for t, r in db["runs"].items():
            if r.get("errors") or r.get("failed") or r.get("rc") not in (None, "0"):
                failures.append(f"{n}/{t}: rc {r.get('rc')} {'; '.join(r.get('errors', []))}")
    if failures:
        lines += ["Failures:", ""] + [f"* {x}" for x in failures] + [""]
    extra = []  # the peak setting's per-query tables (--md and --peak-per-query only)
    for L, db in peaks:
        extra += per_query_table(f"peak, length {L}", db) + [""]
    summary = {"run_info": info, "databases": dbs}
    return "\n".join(lines), "\n".join(extra), summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out_dir", help="the run's $OUT folder")
    ap.add_argument("--md", default=None, help="also write the tables here")
    ap.add_argument("--json", default=None, help="write every parsed number here")
    ap.add_argument(
        "--peak-per-query",
        action="store_true",
        help="also print the per-query table of every peak length (always in --md)",
    )
    args = ap.parse_args(argv)
    text, extra, summary = build(args.out_dir)
    print(text + ("\n" + extra if args.peak_per_query and extra else ""))
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(text + ("\n" + extra if extra else "") + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
