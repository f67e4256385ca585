"""Check reports for people (a table per file) and for tools (JSON)."""

from __future__ import annotations

import json

from zeroplan.deepspeed.findings import RULES, FileReport, summary_text
from zeroplan.render.terminal import Table


def to_json(reports: list[FileReport], failed: bool, strict: bool) -> str:
    document = {"files": [r.to_dict() for r in reports], "strict": strict, "failed": failed,
                "rules": {rule.id: {"name": rule.name, "summary": rule.summary} for rule in RULES.values()}}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _where(finding) -> str:
    if finding.line is None:
        return "-"
    return f"{finding.line}:{finding.column}" if finding.column else str(finding.line)


def render_table(reports: list[FileReport], console, show_assumptions: bool = False) -> None:
    for report in reports:
        title = report.file if report.checked_file == report.file else f"{report.file} → {report.checked_file}"
        repeated = (f" ({report.repeated} finding{'' if report.repeated == 1 else 's'} as reported above for "
                    f"{report.checked_file})") if report.repeated else ""
        if not report.findings:
            console.print(f"{title}: no {'other ' if repeated else ''}findings{repeated}")
        else:
            table = Table(["Rule", "Level", "Line", "Finding and fix"], title=f"{title} ({report.kind}){repeated}",
                          wrap=("Finding and fix",))
            for finding in report.findings:
                text = finding.message + ("\nfix: " + finding.fix if finding.fix else "")
                table.add_row(finding.rule, finding.severity, _where(finding), text)
            console.print(table)
        for skipped in report.skipped:
            console.print(f"  not checked: {', '.join(skipped.rules)}: {skipped.reason}")
        if show_assumptions and report.assumptions:
            console.print("  assumptions (memory rules):")
            for line in report.assumptions:
                console.print(f"    - {line}")
    console.print(summary_text(reports))
