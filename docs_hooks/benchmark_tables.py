"""MkDocs hook: benchmark tables rendered from the JSON the benchmark scripts write.

A page holds ``<!-- benchmark: NAME -->``; it is replaced by the tables and notes of
``docs/benchmarks/NAME.json`` (written by ``python benchmarks/SCRIPT.py ... --json PATH``),
headed by where they were measured: the command, date, commit, CPU, instruction set, cores,
threads, torch version and the load average around the run. A marker without its file, a
file without the facts, and a file that no page shows are warnings (errors under
``mkdocs build --strict``).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.benchmark_tables")

FOLDER = "benchmarks"
MARKER = re.compile(r"<!-- benchmark: ([\w.-]+) -->")
REQUIRED = ("command", "date", "commit", "machine", "tables")
MACHINE = ("cpu_model", "cpu_capability", "cores", "threads", "torch")

_shown: set[str] = set()


def _threads(record: dict) -> str:
    """The torch threads the figures were measured with: the command's ``--threads`` where it
    sets them (0: torch's default), else the measuring process's."""
    match = re.search(r"--threads[ =](\d+)", record["command"])
    if match and int(match.group(1)) > 0:
        return match.group(1)
    return str(record["machine"]["threads"])


def facts(record: dict) -> str:
    """One paragraph: where and when the figures were measured."""
    m = record["machine"]
    flags = ", ".join(record.get("cpu_flags") or []) or "none recorded"
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    commit = (record["commit"] or "unknown")[:12]
    if record.get("uncommitted_changes"):
        commit += " with uncommitted changes"
    load = record.get("load_average") or {}
    text = (
        f"Measured on {m['device']}{gpu} (finished {record['date']}): {m['cpu_model']} "
        f"({m['cpu_capability']}; flags {flags}), {m['cores']} cores, "
        f"{_threads(record)} torch thread(s), torch {m['torch']}, commit `{commit}`; "
        f"load average {load.get('before')} before and {load.get('after')} after; "
        f"{record.get('wall_seconds')} s in all."
    )
    busiest = max((v for v in load.values() if v is not None), default=0)
    if m.get("cores") and busiest > m["cores"]:
        text += (
            f" **The load average exceeded the {m['cores']} cores: other processes competed "
            "for them, so these figures are less certain than their digits suggest.**"
        )
    return text


def _table(table: dict) -> list[str]:
    align = table.get("align") or "l" + "r" * (len(table["columns"]) - 1)
    out = [table["caption"], ""] if table.get("caption") else []
    out.append("| " + " | ".join(c.replace("|", "\\|") for c in table["columns"]) + " |")
    out.append("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table["rows"]]
    return [*out, ""]


def render(name: str, record: dict) -> str:
    lines = [facts(record), "", "```bash", record["command"], "```", ""]
    for table in record["tables"]:
        lines += _table(table)
    for note in record.get("notes") or []:
        lines += [note, ""]
    lines += [f"Raw figures: [`{name}.json`]({FOLDER}/{name}.json).", ""]
    return "\n".join(lines)


def load(docs: Path, name: str) -> dict | None:
    path = docs / FOLDER / f"{name}.json"
    if not path.is_file():
        log.warning("benchmark %s: no %s (run the script with --json)", name, path)
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in REQUIRED if not record.get(k)]
    missing += [f"machine.{k}" for k in MACHINE if k not in (record.get("machine") or {})]
    if missing:
        log.warning("benchmark %s: %s lacks %s", name, path, ", ".join(missing))
        return None
    return record


def on_pre_build(config: MkDocsConfig) -> None:
    _shown.clear()


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: object) -> str:
    docs = Path(config.docs_dir)

    def replace(match: re.Match) -> str:
        name = match.group(1)
        _shown.add(name)
        record = load(docs, name)
        return render(name, record) if record else f"*(benchmark `{name}`: no figures)*"

    return MARKER.sub(replace, markdown)


def on_post_build(config: MkDocsConfig) -> None:
    for path in sorted((Path(config.docs_dir) / FOLDER).glob("*.json")):
        if path.stem not in _shown:
            log.warning("benchmark %s: %s is shown on no page (add its marker)", path.stem, path)
