"""Running bundles in a real browser from Python: a local web server for their folder and
headless Chromium with WebGPU on, reporting what the bundles' own page (index.html) measured.
The test suite's browser check and `pyrite web` use it; nothing here is needed to deploy a
bundle (any static web server serves one)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

from ..errors import PyriteError

# Chromium's switches for a headless run with WebGPU on a machine with no display: WebGPU is
# still behind --enable-unsafe-webgpu on Linux, and Vulkan must be asked for; where the machine
# has no GPU, Chromium's own SwiftShader (a CPU Vulkan) serves. The rest keep a headless start
# quiet on a machine with no network (no background fetches, no first-run pages).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--mute-audio",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """A Chromium-family browser on PATH (PYRITE_CHROMIUM names one), or None."""
    named = os.environ.get("PYRITE_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.path.exists(named) else None)
    for c in CANDIDATES:
        path = shutil.which(c)
        if path:
            return path
    return None


def serve(root, reports=None, port=0):
    """(server, its base URL): a threaded HTTP server of folder `root` on localhost; POSTs to
    /report are parsed as JSON and appended to `reports` (a list)."""
    root = os.path.abspath(root)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def do_POST(self):  # noqa: N802 - (http.server's name)
            n = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(n)
            if reports is not None and self.path.startswith("/report"):
                reports.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, *args):
            pass

    Handler.extensions_map = {**Handler.extensions_map, ".js": "text/javascript"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def run_in_browser(folders, timeout=120.0, full=False, chromium=None) -> list:
    """Run each bundle folder's example in headless Chromium (index.html of the first, the rest
    named by ?bundles=) and return the page's reports: per bundle its outputs' largest
    difference from pyrite's (and every value with `full`), its run times, or an `error`."""
    folders = [os.path.abspath(f) for f in folders]
    root = os.path.dirname(folders[0]) if len(folders) == 1 else os.path.commonpath(folders)
    rel = [urllib.parse.quote(os.path.relpath(f, root).replace(os.sep, "/")) + "/" for f in folders]
    query = {"bundles": ",".join("../" + r for r in rel)}
    if full:
        query["full"] = "1"
    return run_page(root, f"{rel[0]}index.html", query, timeout, chromium)


def run_page(root, page, query=None, timeout=120.0, chromium=None):
    """Open `page` (a path under folder `root`, served on localhost) in headless Chromium with
    `query` and ?report= added, and return the JSON the page POSTs there (its first report)."""
    exe = chromium or find_chromium()
    if exe is None:
        raise PyriteError(
            "pyrite: no Chromium found to run the bundles in (install chromium, or name a "
            "browser with PYRITE_CHROMIUM)"
        )
    reports: list = []
    server, base = serve(root, reports)
    url = f"{base}{page}?{urllib.parse.urlencode({**(query or {}), 'report': '/report'})}"
    profile = tempfile.mkdtemp(prefix="pyrite-chromium-")
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + timeout
        while not reports and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.1)
        if not reports:
            err = b""
            if proc.poll() is not None:
                err = proc.stderr.read()[-2000:]
            raise PyriteError(
                f"pyrite: the browser gave no report within {timeout:.0f} s ({exe}); "
                f"{err.decode(errors='replace')}"
            )
        return reports[0]
    finally:
        proc.kill()
        proc.wait()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
