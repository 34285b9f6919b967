"""A page as a browser renders it: Chromium, headless, driven by its DevTools
protocol over a pipe (--remote-debugging-pipe: fd 3 in, fd 4 out, messages
ended by NUL), loads URL and this prints the page's HTML once the page's
script makes CONDITION (a JavaScript expression) true, within TIMEOUT seconds.

    rendered_page.py CHROMIUM URL CONDITION TIMEOUT

Exit 0 with the HTML on stdout; 1 (and why, on stderr) when the condition
never held or the browser failed. The browser never outlives this script."""
import json
import os
import select
import shutil
import sys
import tempfile
import time

chromium, url, condition, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + timeout

to_browser_r, to_browser_w = os.pipe()
from_browser_r, from_browser_w = os.pipe()
profile = tempfile.mkdtemp(prefix="fedprof-chromium-")
# This machine's network is closed: Chromium reaches for none of its services.
args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank"]
devnull = os.open(os.devnull, os.O_RDWR)
pid = os.posix_spawn(chromium, args, os.environ, file_actions=[
    (os.POSIX_SPAWN_DUP2, to_browser_r, 3), (os.POSIX_SPAWN_DUP2, from_browser_w, 4),
    (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
os.close(to_browser_r)
os.close(from_browser_w)

pending = b""
next_id = 0


def call(method, params=None, session=None):
    """Sends one command and returns its result, skipping events."""
    global pending, next_id
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    os.write(to_browser_w, json.dumps(message).encode() + b"\0")
    while True:
        while b"\0" not in pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([from_browser_r], [], [], left)[0]:
                raise TimeoutError("no answer to " + method)
            chunk = os.read(from_browser_r, 1 << 20)
            if not chunk:
                raise EOFError("the browser ended")
            pending += chunk
        raw, pending = pending.split(b"\0", 1)
        answer = json.loads(raw)
        if answer.get("id") == next_id:
            if "error" in answer:
                raise RuntimeError(method + ": " + json.dumps(answer["error"]))
            return answer["result"]


status = 1
try:
    target = call("Target.createTarget", {"url": url})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    expression = "(%s) ? document.documentElement.outerHTML : null" % condition
    while time.monotonic() < deadline:
        value = call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                     session)["result"].get("value")
        if value:
            sys.stdout.write(value)
            status = 0
            break
        time.sleep(0.25)
    else:
        print("the page never showed what it should within %g s" % timeout, file=sys.stderr)
    try:
        call("Browser.close")
    except (EOFError, TimeoutError):
        pass  # it closed
except Exception as e:  # noqa: BLE001 - any failure is the test's to report
    print("browser: %s" % e, file=sys.stderr)
finally:
    for _ in range(50):
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    shutil.rmtree(profile, ignore_errors=True)
sys.exit(status)
