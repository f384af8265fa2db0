"""Self-contained HTML pages with a sortable, filterable, paged table.

Snakemake's report (9.x) shows an HTML result in a frame, and offers any
other file (``.tsv``) only as a download; so the per-query and per-step
tables are also written as HTML pages.  The page holds the rows as JSON and
a few lines of JavaScript that show one page of rows at a time (the page
stays quick with 100,000 rows), sort by any column (click its header; numeric
columns numerically, ``NA`` last) and filter by text.  Cells are set with
``textContent``, so ids with quotes, ``<`` or ``&`` show as they are.

Size: the one-file report (``snakemake --report report.html``) embeds each
result as a base64 ``data:`` URL, and Chromium-based browsers show no frame
whose URL is longer than 2 MiB (:data:`DATA_URL_LIMIT`): a page of more than
about 1.5 MB (some 20,000 queries) shows empty there.  The ``.zip`` report
keeps files as files and has no such limit; :func:`fits_one_file_report` says
which case a page is in.
"""

from __future__ import annotations

import html
import json

from ..io.atomic import atomic_write

#: Longest URL Chromium opens (url::kMaxURLChars, 2 MiB), data: URLs included.
DATA_URL_LIMIT = 2 * 1024 * 1024

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:14px;margin:12px;color:#222}}
h1{{font-size:18px;margin:0 0 4px}} p.note{{margin:2px 0 10px;color:#555;max-width:70em}}
.bar{{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin:6px 0}}
input[type=search]{{padding:3px 6px;width:22em}} button{{padding:2px 10px}}
table{{border-collapse:collapse}} th,td{{border:1px solid #ddd;padding:3px 8px;white-space:nowrap}}
th{{background:#f0f3f7;cursor:pointer;user-select:none;position:sticky;top:0}}
th.num,td.num{{text-align:right}} tr:nth-child(even) td{{background:#fafafa}}
th .arrow{{color:#3b6ea5}}
</style></head><body>
<h1>{title}</h1>
<p class="note">{note}</p>
<div class="bar">
<input type="search" id="filter" placeholder="filter: text in any text column">
<span>rows per page <select id="size"><option>25</option><option selected>100</option><option>500</option></select></span>
<button id="prev">&larr; previous</button><button id="next">next &rarr;</button>
<span id="info"></span>
</div>
<table><thead><tr id="head"></tr></thead><tbody id="body"></tbody></table>
<script id="data" type="application/json">{data}</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const cols = D.columns, numeric = D.numeric, rows = D.rows;
let view = rows.map((r, i) => i), page = 0, sortCol = -1, sortDir = 1;
const $ = id => document.getElementById(id);
function num(v) {{ const x = parseFloat(v); return isNaN(x) ? null : x; }}
function header() {{
  const tr = $("head"); tr.textContent = "";
  cols.forEach((c, j) => {{
    const th = document.createElement("th");
    th.textContent = c + " ";
    if (numeric[j]) th.className = "num";
    const a = document.createElement("span"); a.className = "arrow";
    a.textContent = j === sortCol ? (sortDir > 0 ? "\\u25B2" : "\\u25BC") : "";
    th.appendChild(a);
    th.title = "sort by " + c;
    th.onclick = () => {{ sortDir = (sortCol === j) ? -sortDir : (numeric[j] ? -1 : 1); sortCol = j; apply(); }};
    tr.appendChild(th);
  }});
}}
function apply() {{
  const f = $("filter").value.toLowerCase();
  view = [];
  for (let i = 0; i < rows.length; i++) {{
    if (!f) {{ view.push(i); continue; }}
    const r = rows[i];
    for (let j = 0; j < cols.length; j++) {{
      if (!numeric[j] && String(r[j]).toLowerCase().includes(f)) {{ view.push(i); break; }}
    }}
  }}
  if (sortCol >= 0) {{
    const j = sortCol;
    if (numeric[j]) {{
      const key = new Map(view.map(i => [i, num(rows[i][j])]));
      view.sort((a, b) => {{
        const x = key.get(a), y = key.get(b);
        if (x === null || y === null) return (x === null) - (y === null) || a - b;
        return (x - y) * sortDir || a - b;
      }});
    }} else {{
      view.sort((a, b) => {{
        const x = String(rows[a][j]), y = String(rows[b][j]);
        return (x < y ? -1 : x > y ? 1 : 0) * sortDir || a - b;
      }});
    }}
  }}
  page = 0; header(); show();
}}
function show() {{
  const size = parseInt($("size").value), pages = Math.max(1, Math.ceil(view.length / size));
  page = Math.min(Math.max(page, 0), pages - 1);
  const body = $("body"); body.textContent = "";
  const frag = document.createDocumentFragment();
  for (const i of view.slice(page * size, (page + 1) * size)) {{
    const tr = document.createElement("tr");
    rows[i].forEach((v, j) => {{
      const td = document.createElement("td");
      td.textContent = v; if (numeric[j]) td.className = "num"; tr.appendChild(td);
    }});
    frag.appendChild(tr);
  }}
  body.appendChild(frag);
  const a = view.length ? page * size + 1 : 0, b = Math.min(view.length, (page + 1) * size);
  $("info").textContent = "rows " + a.toLocaleString() + "\\u2013" + b.toLocaleString() + " of " +
    view.length.toLocaleString() + (view.length < rows.length ? " (filtered from " + rows.length.toLocaleString() + ")" : "") +
    ", page " + (page + 1) + " of " + pages;
}}
$("filter").oninput = apply;
$("size").onchange = () => {{ page = 0; show(); }};
$("prev").onclick = () => {{ page--; show(); }};
$("next").onclick = () => {{ page++; show(); }};
apply();
</script>
</body></html>
"""


def _json_for_script(obj) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def fits_one_file_report(nbytes: int, name: str = "queries.html") -> bool:
    """Whether a page of ``nbytes`` bytes, embedded by Snakemake's one-file
    report as a base64 data: URL, stays within :data:`DATA_URL_LIMIT`."""
    prefix = len(f"data:text/html;charset=utf8;filename={name};base64,")
    return prefix + 4 * ((nbytes + 2) // 3) <= DATA_URL_LIMIT


def write_table_page(
    path, title: str, note: str, columns: list[str], numeric: list[bool], rows: list[list[str]]
) -> int:
    """Write a self-contained HTML page showing ``rows`` (lists of cell texts)
    as a sortable, filterable, paged table (atomically); return its size in bytes."""
    if len(numeric) != len(columns):
        raise ValueError("numeric must have one flag per column")
    data = _json_for_script({"columns": columns, "numeric": numeric, "rows": rows})
    page = _PAGE.format(title=html.escape(title), note=html.escape(note), data=data).encode()
    with atomic_write(path, "wb") as fh:
        fh.write(page)
    return len(page)
