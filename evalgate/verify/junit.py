"""A sweep's verdict as JUnit XML, one testcase per config, every outside text made safe for
XML 1.0 (docs/verify.md, "Outputs").
"""

from __future__ import annotations

from collections.abc import Iterable

from evalgate import outside
from evalgate.verify import baseline_report
from evalgate.verify.records import FAILING, Entry
from evalgate.verify.sweep import Report


def _testcase_body(entries: Iterable[Entry]) -> str:
    lines = []
    for e in entries:
        lines.append(
            f"{e.outcome}: {outside.xml(e.reason)}"
            + (f" [{outside.xml(e.path)}]" if e.path else "")
        )
        if e.versus is not None:
            lines.append(outside.xml(baseline_report.junit_line(e.versus)))
    return "\n".join(lines)


def junit(report: Report) -> str:
    """JUnit XML: one testcase per config (a malformed file is its own case)."""
    groups: dict[str, list[Entry]] = {}
    for entry in report.entries:
        groups.setdefault(entry.key, []).append(entry)
    import xml.etree.ElementTree as ET

    suites = ET.Element("testsuites", name="evalgate verify")
    suite = ET.SubElement(suites, "testsuite", name="evalgate verify")
    tally = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for key, entries in groups.items():
        case = ET.SubElement(
            suite, "testcase", classname="evalgate.verify.sweep", name=outside.xml(key), time="0"
        )
        path = next((e.path for e in entries if e.path), None)
        if path:
            case.set("file", outside.xml(path))
        tally["tests"] += 1
        bad = [e for e in entries if e.outcome in FAILING]
        unsure = [e for e in entries if e.outcome == "inconclusive"]
        if bad:
            broken = [e for e in bad if e.outcome in ("error", "malformed")]
            tag = "error" if broken and len(broken) == len(bad) else "failure"
            tally["errors" if tag == "error" else "failures"] += 1
            message = outside.xml(bad[0].reason)
            element = ET.SubElement(case, tag, type=bad[0].outcome, message=message)
            element.text = _testcase_body(entries)
            continue
        if unsure:
            tally["skipped"] += 1
            message = outside.xml(unsure[0].reason)
            ET.SubElement(case, "skipped", type="inconclusive", message=message)
        ET.SubElement(case, "system-out").text = _testcase_body(entries)
    for element in (suites, suite):
        for name, value in tally.items():
            element.set(name, str(value))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
