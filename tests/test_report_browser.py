"""Each sample's report page in a real headless Chromium (Debian's `chromium`), driven over its
DevTools protocol: no console error, no request that leaves the machine (file: and data: only),
every chart with non-blank pixels in a screenshot, and every number the page tags with a
plan.json path equal to the value in the plan.json that `gen-launch generate` writes.

Without Chromium these tests skip, except in CI (CI=true), where they fail."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from generator.cli import app

from .conftest import SAMPLES

CHROMIUM = ("chromium", "/usr/bin/chromium")
# what keeps Chromium from calling home (the machine's closed network refuses it) and from
# downloading anything
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--window-size=1400,1000")
TIMEOUT_S = 60
runner = CliRunner()


def _chromium() -> str:
    found = next((path for path in map(shutil.which, CHROMIUM) if path), None)
    if found is None:
        why = "chromium is not installed (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"the report's browser tests need Chromium in CI: {why}")
        pytest.skip(why)
    return found


class DevTools:
    """A small client of Chromium's DevTools protocol over its browser websocket: one page
    target, its events kept as they arrive."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.socket = connect(url, max_size=None, open_timeout=TIMEOUT_S)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)

    def send(self, method: str, params: dict | None = None, session: bool = False) -> dict[str, Any]:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = self._receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _receive(self) -> dict[str, Any]:
        reply = json.loads(self.socket.recv(timeout=TIMEOUT_S))
        if "method" in reply:
            self.events.append(reply)
        return reply

    def open(self, url: str) -> list[dict[str, Any]]:
        """Load ``url``; the events of the load (the page's console, log and requests)."""
        self.events = []
        self.send("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            assert time.monotonic() < deadline, f"{url} did not load"
            self._receive()
        self.send("Runtime.evaluate", {"expression": "1"}, session=True)  # events up to now
        return list(self.events)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                           session=True)
        return result["result"]["value"]

    def screenshot(self, box: list[float]) -> bytes:
        x, y, width, height = box
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
        shot = self.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                    "captureBeyondViewport": True}, session=True)
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        self.socket.close()


@pytest.fixture(scope="module")
def browser():
    chromium = _chromium()
    profile = Path(tempfile.mkdtemp(prefix="gen-launch-chromium-"))
    process = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT_S
        while not (port_file.is_file() and len(port_file.read_text().split()) == 2):
            assert process.poll() is None and time.monotonic() < deadline, "Chromium did not start"
            time.sleep(0.1)
        port, path = port_file.read_text().split()
        client = DevTools(f"ws://127.0.0.1:{port}{path}")
        yield client
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT_S)
        shutil.rmtree(profile, ignore_errors=True)


def _plan_records(folder: Path) -> dict[str, Any]:
    """The plan.json generate wrote for one run, as the page's paths read it: the plan, or a
    run in stages as {"stages": [stage 1's, ...]}."""
    if (folder / "plan.json").is_file():
        return json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    stages = sorted(folder.glob("stage-*/plan.json"), key=lambda p: int(p.parent.name.split("-")[1]))
    assert stages, f"no plan.json under {folder}"
    return {"stages": [json.loads(p.read_text(encoding="utf-8")) for p in stages]}


def _at(record: Any, path: str) -> Any:
    for key in path.split("."):
        record = record[int(key)] if isinstance(record, list) else record[key]
    return record


def _agrees(text: str, value: Any) -> bool:
    """Whether the page's text is plan.json's value (1,234 for 1234; 43.02 % for 0.4302)."""
    text = text.strip()
    if value is None:  # (no capacity for the cpu preset)
        return text == "–"
    if isinstance(value, str):
        return text == value
    if text.endswith("%"):
        return abs(float(text[:-1]) / 100 - value) <= 1e-12 * max(1.0, abs(value))
    number = text.replace(",", "")
    return (int(number) == value) if isinstance(value, int) else float(number) == value


def _blank(png: bytes) -> bool:
    """A screenshot of one colour, or with next to nothing but white."""
    from PIL import Image  # (pillow: matplotlib's own dependency, with the report extra)

    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = image.width * image.height
    colours = image.getcolors(maxcolors=pixels) or []
    inked = sum(count for count, colour in colours if colour != (255, 255, 255))
    return len(colours) < 3 or inked < 0.01 * pixels


FACTS = """JSON.stringify({
  numbers: [...document.querySelectorAll('[data-plan]')].map(e => [e.dataset.plan, e.textContent]),
  charts: [...document.querySelectorAll('figure svg')].map(s => {
    const r = s.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; }),
  sections: [...document.querySelectorAll('h2')].map(h => h.textContent)})"""


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.stem for s in SAMPLES])
def test_page_in_chromium(sample: Path, browser: DevTools, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (["report", str(sample)], ["generate", str(sample), "--target", "all", "--quiet"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
    pages = sorted((tmp_path / "launch").rglob("report.html"))
    assert pages
    for page in pages:
        events = browser.open(page.as_uri())
        errors = [e["params"] for e in events if e["method"] == "Runtime.exceptionThrown"
                  or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                  or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
        assert not errors, f"{page}: console errors {errors}"
        requests = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
        assert requests and all(url.startswith(("file:", "data:")) for url in requests), requests
        facts = json.loads(browser.evaluate(FACTS))
        charts = facts["charts"]
        figures = page.read_text(encoding="utf-8").count("<figure>")
        assert len(charts) == figures >= 2 and all(w > 100 and h > 50 for _, _, w, h in charts), charts
        blank = [k for k, box in enumerate(charts) if _blank(browser.screenshot(box))]
        assert not blank, f"{page}: charts {blank} are blank"
        records = _plan_records(page.parent)
        numbers = facts["numbers"]
        assert len(numbers) >= 20, f"{page}: {len(numbers)} numbers tagged"
        wrong = [(path, text, _at(records, path)) for path, text in numbers
                 if not _agrees(text, _at(records, path))]
        assert not wrong, f"{page}: numbers that differ from plan.json {wrong}"
        if "auto" in sample.stem:
            assert any("auto-plan" in title for title in facts["sections"]), facts["sections"]
