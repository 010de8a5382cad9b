#!/usr/bin/env python3
"""The HTML report of `teller diagnose` in a real browser (headless Chromium).

Generates a simulator bundle with a link fault, adds a log line with HTML and a
script tag in it, writes the report with `teller diagnose --html`, renders it
headless and checks: no console error (Chromium's log and the page's own error
counter), the summary, timeline, tree, logs, evidence and explanation are in the
DOM, suspect nodes are highlighted, the injected markup renders as text. Keeps a
1366x900 screenshot under --artifacts. Exit 77 (CTest SKIP) without Chromium.

  python3 tests/browser/report_browser_test.py --teller build/teller \
      --artifacts build/test-artifacts
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
EVIL = "<script>alert(1)</script>"


def find_chromium():
    candidates = [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"]
    for name in candidates:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kwargs)
    if result.returncode != 0:
        sys.stderr.write(f"FAILED: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}\n")
        sys.exit(1)
    return result


def chromium_cmd(chromium, profile):
    return [chromium, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}"]


def inject_log_line(bundle):
    """A rule-matching error line with markup, timed at the last logged line."""
    logs = os.path.join(bundle, "logs")
    files = sorted(f for f in os.listdir(logs) if f.endswith(".jsonl"))
    if not files:
        sys.exit(f"FAILED: no log files in {logs}")
    path = os.path.join(logs, files[0])
    with open(path, encoding="utf-8") as f:
        last = json.loads([line for line in f if line.strip()][-1])
    line = dict(last)
    line["stream"] = "stderr"
    line["text"] = ("ERROR CUDA error: an illegal memory access was encountered "
                    f"<b>html</b> {EVIL}")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--teller", default="build/teller")
    parser.add_argument("--artifacts", default="build/test-artifacts")
    args = parser.parse_args()

    chromium = find_chromium()
    if chromium is None:
        print("SKIP: chromium is not installed (apt-get install chromium)")
        return SKIP
    if not os.access(args.teller, os.X_OK):
        sys.exit(f"FAILED: {args.teller} is not an executable")
    os.makedirs(args.artifacts, exist_ok=True)

    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="teller_browser_") as tmp:
        bundle = os.path.join(tmp, "bundle")
        run([args.teller, "synth", "run", "--engine", "vllm-v1-online", "--faults",
             "link_degradation:magnitude=2.0", "--seed", "7", "--layers", "4", "--requests", "6",
             "-o", bundle])
        inject_log_line(bundle)
        report = os.path.join(tmp, "report.html")
        summary = run([args.teller, "diagnose", bundle, "--html", report, "--color", "never"])
        check(report in summary.stdout, "the terminal summary lists the HTML file")
        shutil.copyfile(report, os.path.join(args.artifacts, "report_browser.html"))
        url = "file://" + report

        profile = os.path.join(tmp, "profile")
        dom_run = subprocess.run(
            chromium_cmd(chromium, profile) +
            ["--enable-logging=stderr", "--v=0", "--dump-dom", url],
            capture_output=True, text=True, timeout=120)
        check(dom_run.returncode == 0, f"chromium --dump-dom exits 0 (got {dom_run.returncode})")
        dom = dom_run.stdout
        with open(os.path.join(args.artifacts, "report_browser_dom.html"), "w") as f:
            f.write(dom)
        console = [line for line in dom_run.stderr.splitlines() if ":CONSOLE" in line]
        for line in console:
            print("  console: " + line)
        check(not console, "no console message (errors, CSP refusals, uncaught exceptions)")
        html_tag = re.search(r"<html[^>]*>", dom)
        html_tag = html_tag.group(0) if html_tag else ""
        check('data-ready="1"' in html_tag, "the page's script ran to DOMContentLoaded")
        check('data-errors="0"' in html_tag, "the page recorded no error")
        suspects = re.search(r'data-suspects="(\d+)"', html_tag)
        check(suspects is not None and int(suspects.group(1)) > 0,
              "the page counts highlighted suspects")
        for section in ["summary", "explanation", "finding-1", "logs", "evidence", "collection"]:
            check(f'<section id="{section}"' in dom, f"section {section} is in the DOM")
        check('<svg class="timeline"' in dom, "a timeline is drawn")
        check(re.search(r'<rect class="n L\d+ suspect[^"]*" data-node="\d+" data-suspect="1"', dom)
              is not None, "suspect bars are highlighted in the timeline")
        check(re.search(r'<ul class="tree">\s*<li><span class="node', dom) is not None,
              "the call-chain tree is listed")
        check(re.search(r'<span class="node suspect" data-node="\d+" data-suspect="1">', dom)
              is not None, "suspects are highlighted in the tree")
        check(re.search(r'id="explanation-text"><b>Explanation.</b> \S', dom) is not None,
              "the explanation has text")
        check('id="next-action"' in dom, "the next action is shown")
        check("illegal memory access" in dom, "the injected log line is shown")
        check("&lt;script&gt;alert(1)&lt;/script&gt;" in dom, "a script tag in a log renders as text")
        check("&lt;b&gt;html&lt;/b&gt;" in dom and "<b>html</b>" not in dom,
              "HTML in a log renders as text")
        check(len(re.findall(r"<script", dom)) == 1, "the page has exactly its own script element")

        screenshot = os.path.join(args.artifacts, "report_browser.png")
        if os.path.exists(screenshot):
            os.remove(screenshot)
        shot = subprocess.run(
            chromium_cmd(chromium, profile) +
            ["--hide-scrollbars", f"--screenshot={screenshot}", "--window-size=1366,900", url],
            capture_output=True, text=True, timeout=120)
        check(shot.returncode == 0 and os.path.exists(screenshot) and
              os.path.getsize(screenshot) > 10000, f"screenshot written to {screenshot}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
