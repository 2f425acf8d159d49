#!/usr/bin/env bash
# Checks the reference mini-program (clients/miniprogram) and the client it runs on:
#   - the TypeScript client runs against a fresh binary, through fetch and through a wx.request
#     stand-in with fetch, Headers and FormData deleted (clients/ts: npm test);
#   - the WeChat build (taro build --type weapp) is a loadable mini-program (npm run check:weapp);
#   - the committed H5 build that the binary serves at /app/ (api/h5app/dist) is what
#     `npm run build:app` makes from the current source;
#   - the H5 app books, pays, shows and scans a QR code, and sees a no-show released, in Debian's
#     Chromium driven by playwright-core (npm run test:e2e), saving screenshots.
# Called by scripts/check-clients.sh after `npm ci` in clients/ts. Installs Chromium and a Chinese
# font with apt when missing, and fails (never skips) when a tool cannot be had.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi 'WenQuanYi Micro Hei'; then
	echo "==> installing chromium and fonts-wqy-microhei (the e2e test's browser, and Chinese glyphs)"
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "check-miniprogram: chromium and fonts-wqy-microhei are needed; install them with apt" >&2
		exit 1
	fi
	apt-get update >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-wqy-microhei >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> go build (the binary the client and the app are tested against)"
go build -o "$tmp/slotwheel" .
export SLOTWHEEL_BIN=$tmp/slotwheel

echo "==> the TypeScript client against the binary (fetch, and wx.request without fetch)"
(cd clients/ts && npm test)

cd clients/miniprogram
echo "==> npm install (clients/miniprogram)"
# Not npm ci: Taro 4.2's optional platform binaries for other systems are gone from the registry, and
# npm ci insists on fetching every one the lockfile names. Install scripts stay off (.npmrc).
npm install --prefer-offline --no-audit --no-fund --loglevel=error

echo "==> weapp build is a loadable mini-program"
npm run --silent build:weapp >"$tmp/weapp.log" 2>&1 || { cat "$tmp/weapp.log"; exit 1; }
npm run --silent check:weapp

echo "==> the committed H5 build (api/h5app/dist) is current"
npm run --silent build:app >"$tmp/h5.log" 2>&1 || { cat "$tmp/h5.log"; exit 1; }
if [[ -n $(git -C "$root" status --porcelain -- api/h5app/dist) ]]; then
	git -C "$root" status --short -- api/h5app/dist >&2
	echo "check-miniprogram: api/h5app/dist is stale; run (cd clients/miniprogram && npm run build:app) and commit it" >&2
	exit 1
fi

echo "==> the H5 app in Chromium against a fresh binary"
go -C "$root" build -o "$SLOTWHEEL_BIN" . # again: the build above is what the binary embeds
npm run test:e2e
