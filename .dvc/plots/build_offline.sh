#!/usr/bin/env bash
# Rebuild offline.html: DVC's plot page with vega, vega-lite and vega-embed inlined from their npm
# packages (the versions DVC's own page loads from a CDN), so `dvc plots show` works offline.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent vega@5.20.2 vega-lite@5.2.0 vega-embed@6.18.2 >/dev/null
for tarball in *.tgz; do mkdir "${tarball%.tgz}" && tar xzf "$tarball" -C "${tarball%.tgz}"; done
{
  printf '<!DOCTYPE html>\n<html>\n<head>\n  <meta charset="utf-8">\n  <title>retrieval-bench plots</title>\n'
  for script in vega-5.20.2/package/build/vega.min.js vega-lite-5.2.0/package/build/vega-lite.min.js vega-embed-6.18.2/package/build/vega-embed.min.js; do
    printf '  <script>\n'; cat "$script"; printf '\n  </script>\n'
  done
  printf '  <style>table { border-spacing: 15px; } body { font-family: sans-serif; }</style>\n</head>\n<body>\n  {plot_divs}\n</body>\n</html>\n'
} > "$here/offline.html"
echo "wrote $here/offline.html"
