"""GitHub Actions workflow commands: `::error file=F,line=L,col=C,title=ZP001::message` per finding.

Escaping follows the runner's rules: in the message %, CR and LF are percent-encoded; in property values
also ':' and ','. Notes become ::notice (they never fail a check).
"""

from __future__ import annotations

from zeroplan.deepspeed.findings import ERROR, WARNING, FileReport, Finding

COMMAND = {ERROR: "error", WARNING: "warning"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    properties = [f"file={_escape_property(finding.file)}"]
    if finding.line is not None:
        properties.append(f"line={finding.line}")
        if finding.column is not None:
            properties.append(f"col={finding.column}")
    properties.append(f"title={_escape_property(finding.rule)}")
    message = f"{finding.name}: {finding.message}" + (f" — fix: {finding.fix}" if finding.fix else "")
    return f"::{COMMAND.get(finding.severity, 'notice')} {','.join(properties)}::{_escape_data(message)}"


def render(reports: list[FileReport]) -> str:
    return "".join(annotation(f) + "\n" for report in reports for f in report.findings)
