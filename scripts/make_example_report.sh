#!/bin/sh
# Regenerate the committed example of the HTML incident report and its screenshot:
#   reports/example.html  (diag analyze on the founding sample, with the real CLI)
#   reports/example.png   (headless Chromium, 1280 px wide, the whole page)
set -eu
cd "$(dirname "$0")/.."
DIAG=${DIAG:-.venv/bin/diag}
CHROMIUM=${CHROMIUM:-chromium}

# exit code 1 means "findings", which is what the sample has
"$DIAG" analyze samples/qwen36-27b-mtp-extra-buffer.log --smi samples/rtx-pro-6000-smi.txt \
    --format html -o reports/example.html || [ $? -eq 1 ]

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
page="file://$PWD/reports/example.html"
browse() {
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
        --disable-sync --no-first-run --user-data-dir="$tmp/profile" "$@" 2>/dev/null
}

# the page's height, measured by a probe page that frames it at 1280 px
cat > "$tmp/probe.html" <<HTML
<!DOCTYPE html><html><body><iframe id="f" src="$page" style="width:1280px;height:800px"></iframe><pre id="h"></pre>
<script>onload = function () { document.getElementById('h').textContent = document.getElementById('f').contentDocument.documentElement.scrollHeight; };</script>
</body></html>
HTML
height=$(browse --allow-file-access-from-files --dump-dom "file://$tmp/probe.html" | sed -n 's/.*<pre id="h">\([0-9]*\)<\/pre>.*/\1/p')
browse --screenshot="$PWD/reports/example.png" --window-size="1280,${height:-2400}" "$page"
echo "wrote reports/example.html and reports/example.png (1280x${height:-2400})"
