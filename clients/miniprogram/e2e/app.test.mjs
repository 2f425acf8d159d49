// The H5 app, as the binary serves it at /app/, driven in Debian's Chromium by playwright-core
// against a fresh slotwheel in embedded mode: a guest books a slot, pays (dev), sees the QR code;
// the desk reads that QR code (decoded from the page by jsQR) and checks it in, twice; a second
// guest sees the slot full; a no-show's slot turns free again after its release. Every page is
// saved as a screenshot under e2e/screenshots/ (SCREENSHOTS=dir to put them elsewhere).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import { apiClient, appLogin, freePort } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const shots = process.env.SCREENSHOTS ?? join(here, "screenshots");
const jsQR = join(here, "..", "node_modules", "jsqr", "dist", "jsQR.js");
const TZ = "+08:00"; // the test venue's zone, Asia/Shanghai, has no DST
const SLOT_MS = 15 * 60_000;
const GRACE_S = 5; // release 5 s after start: a no-show is seen within the test

let dir, server, base, browser, admin, venueId, resourceId, venueName;


const { call, login } = apiClient(() => base);

/** The venue-local RFC 3339 form the API uses for a slot boundary. */
function local(ms) {
  return new Date(ms + 8 * 3600_000).toISOString().slice(0, 19) + TZ;
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), "slotwheel-e2e-"));
  let bin = process.env.SLOTWHEEL_BIN;
  if (!bin) {
    bin = join(dir, "slotwheel");
    execFileSync("go", ["build", "-o", bin, "."], { cwd: repo, stdio: "inherit" });
  }
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SLOTWHEEL_")));
  server = spawn(bin, ["all"], {
    env: { ...env, SLOTWHEEL_HTTP_ADDR: `127.0.0.1:${port}`, SLOTWHEEL_SQLITE_PATH: join(dir, "slotwheel.db") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  await new Promise((resolve, reject) => {
    server.stdout.on("data", (c) => {
      log += c;
      if (log.includes("slotwheel is listening on")) resolve();
    });
    server.stderr.on("data", (c) => (log += c));
    server.once("exit", (code) => reject(new Error(`slotwheel exited (${code}):\n${log}`)));
  });
  base = `http://127.0.0.1:${port}`;

  // A court of its own: capacity 1, 15-minute slots around the clock, released 5 s after start.
  admin = await login({ user_id: "ops", role: "admin" });
  venueName = "E2E 网球中心";
  venueId = (await call("POST", "/api/v1/admin/venues", admin, { name: venueName, timezone: "Asia/Shanghai" })).venue_id;
  resourceId = (
    await call("POST", "/api/v1/admin/resources", admin, {
      venue_id: venueId, name: "中心场 Centre court", kind: "court", capacity: 1, category: "e2e", price_cents: 6000,
    })
  ).resource_id;
  await call("PUT", `/api/v1/admin/resources/${resourceId}/schedule`, admin, {
    slot_minutes: 15, weekly: [{ weekdays: [1, 2, 3, 4, 5, 6, 7], open: "00:00", close: "24:00" }], horizon_days: 3,
  });
  await call("PUT", "/api/v1/admin/policies/grace", admin, { category: "e2e", grace_seconds: GRACE_S });

  browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--no-sandbox"] });
});

after(async () => {
  // What each page showed when the test ended, failed or not.
  for (const [i, p] of pages.entries()) {
    await p.screenshot({ path: join(shots, `last-${i}.png`), fullPage: true }).catch(() => undefined);
  }
  await browser?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    server.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const pages = [];

/**
 * A phone-sized page of its own (its own storage, so its own log-in). Its clock reads Los Angeles
 * time, whose date differs from the venue's (Shanghai) for 16 hours a day: the app must show the
 * venue's days, whatever zone the phone is set to.
 */
async function phone() {
  const context = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    locale: "zh-CN",
    timezoneId: "America/Los_Angeles",
  });
  const page = await context.newPage();
  pages.push(page);
  return page;
}

const devLogin = (page, name, staffVenue) => appLogin(base, page, name, staffVenue);

async function openSlots(page, startMs) {
  await page.goto(`${base}/app/#/pages/resource/index?id=${resourceId}`);
  const date = local(startMs).slice(0, 10);
  await page.locator(`.date[data-date="${date}"]`).click();
  const slot = page.locator(`.slot[data-start="${local(startMs)}"]`);
  await slot.waitFor();
  return slot;
}

test("a guest books and pays, the desk scans the QR code, another guest finds the slot full, a no-show frees it", async () => {
  // The slot in progress takes the no-show; the next one the booking that is checked in. A slot
  // ending within a minute would be over before the test looks at it: then start from the next.
  let now = Date.now();
  if (SLOT_MS - (now % SLOT_MS) < 60_000) {
    await new Promise((r) => setTimeout(r, SLOT_MS - (now % SLOT_MS) + 1000));
    now = Date.now();
  }
  const current = now - (now % SLOT_MS);
  const next = current + SLOT_MS;

  // 1. Alice picks the next slot on the date strip and grid.
  const alice = await phone();
  await devLogin(alice, "alice");
  await alice.screenshot({ path: join(shots, "01-venues.png") });
  const slot = await openSlots(alice, next);
  assert.match(await slot.innerText(), /可约/);
  await assert.doesNotReject(alice.locator(".date.free").first().waitFor());
  await slot.click();
  await alice.screenshot({ path: join(shots, "02-slots.png") });

  // 2. Hold: while the answer is on its way the button is disabled and spins.
  let release;
  const held = new Promise((r) => (release = r));
  await alice.route("**/api/v1/holds", async (route) => {
    await held;
    await route.continue();
  });
  await alice.locator(".confirm").click();
  const confirm = alice.locator("button.confirm, .confirm button, taro-button-core.confirm").first();
  await alice.locator(".confirm .spinner").waitFor();
  assert.ok(["", "true"].includes(await confirm.getAttribute("disabled")), "the button is disabled while the hold is in flight");
  release();
  await alice.locator(".countdown").waitFor();
  await alice.locator('.hold .btn[disabled="false"]').first().waitFor();
  assert.match(await alice.locator(".countdown").innerText(), /^(09|10):\d\d$/, "a 10-minute hold counts down");
  await alice.screenshot({ path: join(shots, "03-hold-countdown.png") });
  await alice.unroute("**/api/v1/holds");

  // 3. Pay (dev payments in embedded mode): the booking page shows the QR code and the code.
  await alice.getByText(/模拟支付/).click();
  await alice.waitForFunction(() => location.hash.includes("pages/booking/index"));
  await alice.locator(".code").waitFor();
  await alice.waitForFunction(() => {
    const img = document.querySelector(".qr img") ?? document.querySelector("img.qr");
    return img && img.complete && img.naturalWidth > 0;
  });
  const code = (await alice.locator(".code").innerText()).trim();
  assert.match(code, /^[A-Z2-9]{8}$/);
  assert.match(await alice.locator(".status").first().innerText(), /已确认/);
  await alice.screenshot({ path: join(shots, "04-booking-qr.png"), fullPage: true });

  // 4. What a scanner reads from that QR code, with a decoder of its own (jsQR).
  await alice.addScriptTag({ path: jsQR });
  const payload = await alice.evaluate(() => {
    const img = document.querySelector(".qr img") ?? document.querySelector("img.qr");
    const c = document.createElement("canvas");
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height);
    return window.jsQR(d.data, c.width, c.height)?.data;
  });
  assert.equal(payload, `SWCHK:${code}`);

  // 5. The desk checks it in from the scanned payload; a second scan is harmless.
  const desk = await phone();
  await devLogin(desk, "desk-1", venueName);
  const input = desk.locator(".code-input input");
  await input.fill(payload);
  await desk.locator(".checkin").click();
  await desk.locator(".result").waitFor();
  assert.match(await desk.locator(".result").innerText(), /核销成功/);
  assert.match(await desk.locator(".desk-row").filter({ hasText: "alice" }).innerText(), /已核销入场/);
  await desk.screenshot({ path: join(shots, "05-desk-checked-in.png"), fullPage: true });
  await input.fill(code.toLowerCase()); // typed by hand this time
  await desk.locator(".checkin").click();
  await desk.locator(".result").getByText(/此前已核销/).waitFor();
  await alice.reload();
  await alice.locator(".status").getByText("已核销入场").first().waitFor();

  // 6. Bob finds Alice's slot full (the court takes one booking per slot).
  const bob = await phone();
  await devLogin(bob, "bob");
  const taken = await openSlots(bob, next);
  assert.match(await taken.getAttribute("class"), /full/);
  assert.match(await taken.innerText(), /约满/);
  await bob.screenshot({ path: join(shots, "06-slot-full.png") });

  // 7. Carol pays for the slot in progress and never turns up: 5 s later it is released and
  // Bob sees it free again.
  const carol = await login({ user_id: "carol" });
  const hold = await call("POST", "/api/v1/holds", carol, { resource_id: resourceId, start: local(current), end: local(next) });
  const booking = await call("POST", `/api/v1/holds/${hold.hold_id}/confirm`, carol);
  const running = await openSlots(bob, current);
  assert.match(await running.innerText(), /约满/);
  await bob.screenshot({ path: join(shots, "07a-slot-taken-by-no-show.png") });
  const deadline = Date.parse(booking.release_at) + 30_000;
  for (;;) {
    const s = await openSlots(bob, current);
    if (/可约/.test(await s.innerText())) break;
    assert.ok(Date.now() < deadline, "the no-show's slot was not freed within 30 s of release_at");
    await bob.waitForTimeout(500); // the release runs on the server; nothing in the page to wait on
  }
  assert.ok(Date.now() >= Date.parse(booking.release_at), "never released early");
  await bob.screenshot({ path: join(shots, "07b-slot-free-after-release.png") });

  // Carol's booking page says what happened and offers the restore window.
  const carolPage = await phone();
  await devLogin(carolPage, "carol");
  await carolPage.goto(`${base}/app/#/pages/booking/index?id=${booking.booking_id}`);
  await carolPage.locator(".status").getByText("已释放（未到场）").first().waitFor();
  await carolPage.getByText("恢复预约").waitFor();
  await carolPage.screenshot({ path: join(shots, "08-released-booking.png"), fullPage: true });

  // Alice's list of bookings.
  await alice.goto(`${base}/app/#/pages/bookings/index`);
  await alice.locator(".booking").first().waitFor();
  await alice.screenshot({ path: join(shots, "09-my-bookings.png") });
});
