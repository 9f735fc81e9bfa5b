"""The report in a real browser: headless Chromium loads every image and runs no injected
markup (issue 17). Needs Debian's ``chromium`` (``.ci/run`` installs it); skipped without it.

The check is a copy of the report with one script of the test's own appended: it runs after
the page loads and writes, into the DOM, how many images there are and how many decoded.
That script running proves scripts run in the page, so the absence of the injected
payloads' marker proves none of them executed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from anpred.report.html import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: Payloads that would mark the page if the browser executed them.
PAYLOADS = (
    "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">",
    "<script>document.documentElement.setAttribute('data-pwned','script')</script>",
    "\"><svg onload=\"document.documentElement.setAttribute('data-pwned','svg')\">",
)

CHECKER = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.documentElement.setAttribute('data-images', String(imgs.length));
  document.documentElement.setAttribute('data-images-ok', String(ok.length));
});
</script>"""


def _poison(summary: dict[str, Any]) -> dict[str, Any]:
    """Every user-provided string of the hostile summary, replaced by a live payload."""
    import json

    text = json.dumps(summary)
    for i, payload in enumerate(PAYLOADS):
        text = text.replace(json.dumps("<script>alert(1)</script>")[1:-1],
                            json.dumps(payload)[1:-1], 1 if i < len(PAYLOADS) - 1 else -1)
    return json.loads(text)


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
         "--virtual-time-budget=10000", *args],
        capture_output=True, text=True, timeout=180,
    )


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_report_loads_every_image_and_runs_no_injected_markup(
    tmp_path: Path, hostile: dict[str, Any]
) -> None:
    report = write_report(tmp_path / "run", _poison(hostile))
    html = report.read_text(encoding="utf-8")
    assert "data-pwned" in html  # the payloads are in the page (escaped)
    checked = report.with_name("checked.html")
    checked.write_text(html.replace("</body>", CHECKER + "</body>"), encoding="utf-8")
    dom = _chromium("--dump-dom", checked.as_uri(), profile=tmp_path / "profile").stdout
    root = re.search(r"<html[^>]*>", dom)
    assert root, dom[:500]
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', root.group(0)))
    assert "data-pwned" not in attrs, f"injected markup ran: {attrs}"
    assert int(attrs["data-images"]) >= 4  # one per plot
    assert attrs["data-images-ok"] == attrs["data-images"]
    screenshot = tmp_path / "report.png"
    _chromium("--window-size=1280,3000", f"--screenshot={screenshot}", report.as_uri(),
              profile=tmp_path / "profile")
    assert screenshot.stat().st_size > 10_000  # a rendered page, not a blank one
    print(f"screenshot: {screenshot}")
