#!/usr/bin/env python3
"""Regression check of svc's shipped ModSecurity rules on an Apache-style engine.

Starts a disposable Apache with mod_security2 (Debian: apache2, libapache2-mod-security2) on
a free loopback port, with its configuration, pid file and logs in a temporary directory
(never the system service), loading rules/modsecurity/svc-rules.conf, then sends the request
matrix of rule 900112 (REST user enumeration) and of the caching-plugin role-simulation
filter and compares each answer with the expected one (403 denied, anything else passed).
Then it disables 900112 with an overrides file and a graceful reload and checks that both
route forms pass while the role-simulation filter still denies.

This validates the rules on the Apache-style engine only; it does not establish
compatibility with the commercial LiteSpeed server.

Usage: scripts/test-litespeed-modsec.py [--rules FILE] [--keep]
Exit status: 0 every case as expected, 1 a case failed, 2 the environment is missing.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

APACHE = "/usr/sbin/apache2"
MODULES = "/usr/lib/apache2/modules"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RULES = os.path.join(HERE, "..", "rules", "modsecurity", "svc-rules.conf")

WEAK = "Cookie: litespeed_role=1; litespeed_hash=abc123"
STRONG = "Cookie: litespeed_role=1; litespeed_hash=0123456789abcdef0123456789abcdef"

# (description, method, target, headers, body, denied)
MATRIX = [
    ("900112 path form", "GET", "/wp-json/wp/v2/users", [], "", True),
    ("900112 mixed case", "GET", "/WP-JSON/wp/v2/Users/1", [], "", True),
    ("900112 percent-encoded path", "GET", "/wp-json/wp/v2/us%65rs", [], "", True),
    ("900112 subdirectory install", "GET", "/blog/wp-json/wp/v2/users", [], "", True),
    ("900112 rest_route encoded", "GET", "/?rest_route=%2Fwp%2Fv2%2Fusers", [], "", True),
    ("900112 rest_route mixed case", "GET", "/?rest_route=/WP/v2/USERS/1", [], "", True),
    ("900112 rest_route without slash", "GET", "/index.php?rest_route=wp/v2/users", [], "", True),
    ("900112 Authorization passes", "GET", "/wp-json/wp/v2/users", ["Authorization: Basic eDp5"], "", False),
    ("900112 logged-in cookie passes", "GET", "/?rest_route=/wp/v2/users", ["Cookie: wordpress_logged_in_abc=x"], "", False),
    ("other REST routes pass", "GET", "/wp-json/wp/v2/posts", [], "", False),
    ("route only in a POST body is out of scope", "POST", "/", [], "rest_route=/wp/v2/users", False),
    ("role simulation: weak hash on wp-admin", "GET", "/wp-admin/", [WEAK], "", True),
    ("role simulation: weak hash on rest_route", "GET", "/?rest_route=/wp/v2/posts", [WEAK], "", True),
    ("role simulation: weak hash on a write", "POST", "/", [WEAK], "a=b", True),
    ("role simulation: _method override", "GET", "/?_method=DELETE", [WEAK], "", True),
    ("role simulation: X-HTTP-Method-Override", "GET", "/", [WEAK, "X-HTTP-Method-Override: PUT"], "", True),
    ("role simulation: leading zeros", "GET", "/wp-admin/", ["Cookie: litespeed_hash=0000000000000000000123"], "", True),
    ("role simulation: exponent notation", "GET", "/wp-admin/", ["Cookie: litespeed_hash=1.5e3"], "", True),
    ("role simulation: public GET allowed", "GET", "/", [WEAK], "", False),
    ("role simulation: public HEAD allowed", "HEAD", "/", [WEAK], "", False),
    ("role simulation: strong hash on wp-admin", "GET", "/wp-admin/", [STRONG], "", False),
    ("role simulation: strong hash on a write", "POST", "/", [STRONG], "a=b", False),
]

AFTER_DISABLE = [
    ("900112 disabled: path form passes", "GET", "/wp-json/wp/v2/users", [], "", False),
    ("900112 disabled: rest_route form passes", "GET", "/?rest_route=/wp/v2/users", [], "", False),
    ("role simulation still denies", "GET", "/wp-admin/", [WEAK], "", True),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def request(port, method, target, headers, body):
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost", "Connection: close"] + headers
    if body:
        lines += ["Content-Type: application/x-www-form-urlencoded", f"Content-Length: {len(body)}"]
    raw = ("\r\n".join(lines) + "\r\n\r\n" + body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def run_cases(port, cases):
    failed = 0
    for desc, method, target, headers, body, denied in cases:
        status = request(port, method, target, headers, body)
        ok = (status == 403) == denied
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {status} {desc}: {method} {target}")
    return failed


def wait_up(port):
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("apache did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", default=DEFAULT_RULES)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    for p in (APACHE, os.path.join(MODULES, "mod_security2.so")):
        if not os.path.exists(p):
            print(f"missing {p}: apt-get install apache2 libapache2-mod-security2", file=sys.stderr)
            return 2
    work = tempfile.mkdtemp(prefix="svc-modsec-")
    port = free_port()
    conf = os.path.join(work, "httpd.conf")
    os.makedirs(os.path.join(work, "htdocs"))
    shutil.copy(a.rules, os.path.join(work, "svc-rules.conf"))
    open(os.path.join(work, "svc-overrides.conf"), "w").close()
    with open(os.path.join(work, "modsec.conf"), "w") as f:
        f.write(
            f"SecRuleEngine On\nSecRequestBodyAccess On\nSecAuditEngine Off\nSecDataDir {work}\n"
            f"SecTmpDir {work}\nInclude {work}/svc-rules.conf\nInclude {work}/svc-overrides.conf\n"
        )
    with open(conf, "w") as f:
        f.write(
            f"ServerRoot {work}\nListen 127.0.0.1:{port}\nPidFile {work}/httpd.pid\n"
            f"ErrorLog {work}/error.log\nLogLevel warn\n"
            f"LoadModule mpm_event_module {MODULES}/mod_mpm_event.so\n"
            f"LoadModule authz_core_module {MODULES}/mod_authz_core.so\n"
            f"LoadModule unique_id_module {MODULES}/mod_unique_id.so\n"
            f"LoadModule security2_module {MODULES}/mod_security2.so\n"
            f"ServerName localhost\nDocumentRoot {work}/htdocs\n"
            f"<Directory {work}/htdocs>\n  Require all granted\n</Directory>\n"
            f"Include {work}/modsec.conf\n"
        )
    failed = 0
    try:
        subprocess.run([APACHE, "-f", conf, "-k", "start"], check=True)
        wait_up(port)
        failed += run_cases(port, MATRIX)
        with open(os.path.join(work, "svc-overrides.conf"), "w") as f:
            f.write("SecRuleRemoveById 900112\n")
        subprocess.run([APACHE, "-f", conf, "-k", "graceful"], check=True)
        deadline = time.time() + 20
        while time.time() < deadline and request(port, "GET", "/wp-json/wp/v2/users", [], "") == 403:
            time.sleep(0.2)
        failed += run_cases(port, AFTER_DISABLE)
    finally:
        subprocess.run([APACHE, "-f", conf, "-k", "stop"], check=False)
        for _ in range(100):
            if not os.path.exists(os.path.join(work, "httpd.pid")):
                break
            time.sleep(0.05)
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = len(MATRIX) + len(AFTER_DISABLE)
    print(f"{total - failed}/{total} cases as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
