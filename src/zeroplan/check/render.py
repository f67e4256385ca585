"""Check reports for people (a rich table per file) and for tools (JSON)."""

from __future__ import annotations

import json

from zeroplan.deepspeed.findings import RULES, FileReport, summary_text


def to_json(reports: list[FileReport], failed: bool, strict: bool) -> str:
    document = {"files": [r.to_dict() for r in reports], "strict": strict, "failed": failed,
                "rules": {rule.id: {"name": rule.name, "summary": rule.summary} for rule in RULES.values()}}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _where(finding) -> str:
    if finding.line is None:
        return "-"
    return f"{finding.line}:{finding.column}" if finding.column else str(finding.line)


def render_table(reports: list[FileReport], console, show_assumptions: bool = False) -> None:
    from rich.table import Table
    from rich.text import Text

    for report in reports:
        title = report.file if report.checked_file == report.file else f"{report.file} → {report.checked_file}"
        if not report.findings:
            console.print(f"{title}: no findings")
        else:
            table = Table(title=f"{title} ({report.kind})", title_justify="left", expand=True)
            table.add_column("Rule", no_wrap=True)
            table.add_column("Level", no_wrap=True)
            table.add_column("Line", no_wrap=True)
            table.add_column("Finding and fix", ratio=1, overflow="fold")
            for finding in report.findings:
                text = Text(finding.message)
                if finding.fix:
                    text.append("\nfix: " + finding.fix, style="dim")
                table.add_row(finding.rule, finding.severity, _where(finding), text)
            console.print(table)
        for skipped in report.skipped:
            console.print(f"  not checked: {', '.join(skipped.rules)}: {skipped.reason}")
        if show_assumptions and report.assumptions:
            console.print("  assumptions (memory rules):")
            for line in report.assumptions:
                console.print(f"    - {line}")
    console.print(summary_text(reports))
