#!/usr/bin/env bash
# Checks what client developers rely on besides the Go tests:
#   - clients/ts/src/schema.ts is exactly what openapi-typescript makes from api/openapi.json (the
#     document the server embeds and serves at /openapi.json), so the committed client is not stale;
#   - the TypeScript client and its example type-check (tsc --noEmit);
#   - api/openapi.json lints clean under Redocly's recommended-strict rules (redocly.yaml);
#   - the client runs, and the reference mini-program builds and works: scripts/check-miniprogram.sh.
# Tool versions come from clients/ts/package-lock.json. Node.js (>= 20.19) and npm are required: without
# them this fails rather than skips, so that CI cannot pass without having checked.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "check-clients: $tool not found; install Node.js >= 20.19 with npm" >&2
		exit 1
	fi
done

# Redocly CLI: no usage reporting and no version check from CI.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

cd clients/ts

echo "==> npm ci (clients/ts)"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error

echo "==> clients/ts/src/schema.ts is up to date with api/openapi.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm run --silent generate:to -- "$tmp/schema.ts" >/dev/null
if ! diff -u src/schema.ts "$tmp/schema.ts"; then
	echo "check-clients: clients/ts/src/schema.ts is stale; run (cd clients/ts && npm run generate) and commit it" >&2
	exit 1
fi

echo "==> tsc --noEmit (clients/ts)"
npx --no-install tsc --noEmit

echo "==> redocly lint api/openapi.json"
cd "$root"
clients/ts/node_modules/.bin/redocly lint api/openapi.json

echo "==> the client at run time and the reference mini-program"
"$root/scripts/check-miniprogram.sh"
