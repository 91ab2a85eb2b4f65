#!/usr/bin/env bash
# Vendors KaTeX (MIT) for the audit report: the formulas render from the report folder itself, with
# no network at view time. Takes from the npm registry's tarball only what the page loads:
# katex.min.js, katex.min.css (its @font-face rules cut to the woff2 files, so it names no file we do
# not ship) and the 20 woff2 fonts, plus the licence. Re-run to update; commit the result.
#   bash scripts/vendor_katex.sh [VERSION]      (default 0.16.47)
set -euo pipefail
version="${1:-0.16.47}"
dest="$(cd "$(dirname "$0")/.." && pwd)/proofs/audit/static/katex"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "katex@${version}" >/dev/null && tar xzf "katex-${version}.tgz")
src="$work/package"
rm -rf "$dest"
mkdir -p "$dest/fonts"
cp "$src/dist/katex.min.js" "$src/LICENSE" "$dest/"
cp "$src"/dist/fonts/*.woff2 "$dest/fonts/"
# keep only the woff2 source of each @font-face (every browser that runs the page reads woff2)
sed -E 's/,url\(fonts\/[A-Za-z0-9_-]+\.woff\) format\("woff"\),url\(fonts\/[A-Za-z0-9_-]+\.ttf\) format\("truetype"\)//g' \
  "$src/dist/katex.min.css" > "$dest/katex.min.css"
if grep -Eq '\.(woff|ttf)\)' "$dest/katex.min.css"; then
  echo "vendor_katex: katex.min.css still names woff/ttf files; the sed pattern needs updating" >&2
  exit 1
fi
sha=$(sha256sum "$work/katex-${version}.tgz" | cut -d' ' -f1)
cat > "$dest/VENDORED.txt" <<TXT
KaTeX ${version} (MIT licence, see LICENSE), from the npm registry tarball katex-${version}.tgz
(sha256 ${sha}), by scripts/vendor_katex.sh. Files kept: dist/katex.min.js, dist/katex.min.css
(its @font-face sources cut to the woff2 files: the only change), dist/fonts/*.woff2, LICENSE.
TXT
echo "vendor_katex: KaTeX ${version} -> ${dest} ($(du -sh "$dest" | cut -f1))"
