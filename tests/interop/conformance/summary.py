"""One line per scenario of a conformance results directory: passed checks, and the failed ones."""
import glob
import json
import os
import re
import sys

out = sys.argv[1]
rows = {}
for f in glob.glob(os.path.join(out, "**", "checks.json"), recursive=True):
    name = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", os.path.relpath(os.path.dirname(f), out))
    checks = json.load(open(f))
    passed = sum(1 for c in checks if c.get("status") == "SUCCESS")
    failed = [c["id"] for c in checks if c.get("status") == "FAILURE"]
    rows[name] = (passed, failed)
for name in sorted(rows):
    passed, failed = rows[name]
    verdict = "pass" if not failed else "FAIL " + ", ".join(failed)
    print(f"  {name:45} {passed:3} passed  {verdict}")
