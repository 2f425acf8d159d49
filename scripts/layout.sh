#!/usr/bin/env bash
# Prints README.md's package table from the packages' own comments (their first sentence), so that
# the map of the code is the code's: run it after adding, moving or re-describing a package, and
# paste its output between the markers in README.md's Layout section. TestReadmeLayout fails when
# the two differ.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
module=$(go list -m)
echo "| package | what it owns |"
echo "| --- | --- |"
go list -f '{{.ImportPath}}	{{.Doc}}' ./... | while IFS=$'\t' read -r path doc; do
	rel=${path#"$module"}
	rel=${rel#/}
	case $rel in
	e2e | e2e/* | clients/*) continue ;; # tests and clients are described in their own sections
	esac
	[[ -z $rel ]] && rel="(root)"
	doc=${doc//|/\\|}
	printf '| `%s` | %s |\n' "$rel" "$doc"
done
