// The operator console (/admin/) through a venue's day, driven in Debian's Chromium by
// playwright-core against a fresh slotwheel on MariaDB and a private Redis (not embedded mode):
//
//   1. an admin sets up a venue and a court that needs approval (a field error on the way), and a
//      grace of seconds for its category;
//   2. two guests book the slot in progress on the H5 app (/app/) and see 等待审核;
//   3. the venue's staff approve one, decline the other with a reason (refunded);
//   4. the board shows the approved booking, by day and by week;
//   5. the guest does not turn up: the booking is released at release_at, never before;
//   6. she appeals at the desk: staff find the booking by its code and restore it with a reason;
//   7. her new release fails (UPDATE on bookings revoked from the binary's MySQL user), is archived
//      as an operator would on the Asynq dashboard, fails again when re-driven from the console's
//      Operations page, and is done once the privilege is back;
//   8. a third guest is approved and checked in by code; an admin looks a guest up; the board on a
//      tablet.
//
// Screenshots go to e2e/screenshots/console-*.png (SCREENSHOTS=dir to put them elsewhere, e.g.
// SCREENSHOTS=../../docs for the ones the README shows). MariaDB: SLOTWHEEL_TEST_MYSQL_DSN's server
// and user (root@127.0.0.1:3306 by default), which must be able to create databases and users. When
// it or redis-server cannot be had the test is skipped, or fails with SLOTWHEEL_TEST_REQUIRE_SERVERS=1.
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn, spawnSync } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { chromium } from "playwright-core";

import { apiClient, appLogin, freePort } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const shots = process.env.SCREENSHOTS ?? join(here, "screenshots");
const failureShots = join(here, "screenshots"); // never docs/: what the pages showed when a step failed

const VENUE = "滨江网球中心";
const RESOURCE = "1号场";
const CATEGORY = "e2e-court";
const GRACE_MINUTES = "0.25"; // what the policies form takes: minutes, decimals allowed
const GRACE_S = 15;
const APPROVAL_WINDOW_MIN = 30;
const APPEAL = "客人堵车，已到前台";
const DECLINE = "场地维护";
// Slot lengths tried, in order, for a grid whose slot in progress lasts the whole test (at least
// NEED_MS more): 60 minutes unless the hour is nearly over.
const SLOT_CHOICES = [60, 45, 50, 40];
const NEED_MS = 5 * 60_000;
const OFFSET_MS = 8 * 3600_000; // Asia/Shanghai, no DST
const TZ = "+08:00";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const run = promisify(execFile);

// ---- the MariaDB server, through its command-line client ----

const adminDb = (() => {
  const m = /^([^:@]*)(?::([^@]*))?@tcp\(([^:)]+)(?::(\d+))?\)/.exec(process.env.SLOTWHEEL_TEST_MYSQL_DSN ?? "");
  return m ? { user: m[1] || "root", password: m[2] ?? "", host: m[3], port: m[4] ?? "3306" } : { user: "root", password: "", host: "127.0.0.1", port: "3306" };
})();
const sqlClient = ["mariadb", "mysql"].find((c) => spawnSync(c, ["--version"]).status === 0);
const sqlArgs = (statement) => [
  "--protocol=tcp", `--host=${adminDb.host}`, `--port=${adminDb.port}`, `--user=${adminDb.user}`,
  "--connect-timeout=5", "--batch", "--skip-column-names", "-e", statement,
];
const sqlEnv = { ...process.env, MYSQL_PWD: adminDb.password };

async function sql(statement) {
  try {
    return (await run(sqlClient, sqlArgs(statement), { env: sqlEnv, timeout: 20_000 })).stdout;
  } catch (err) {
    throw new Error(`${sqlClient} -e "${statement}": ${err.stderr?.trim() || err.message}`);
  }
}

/** Why the servers this test needs cannot be had, or "" when they can. */
async function serversProblem() {
  if (!sqlClient) return "no mariadb (or mysql) client is installed";
  if (spawnSync("redis-server", ["--version"]).status !== 0) return "redis-server is not installed";
  try {
    await sql("SELECT 1");
  } catch (err) {
    return `MariaDB at ${adminDb.host}:${adminDb.port} (user ${adminDb.user}) cannot be reached: ${err.message}`;
  }
  return "";
}

const problem = await serversProblem();
const required = process.env.SLOTWHEEL_TEST_REQUIRE_SERVERS === "1";
const skip = problem && !required ? `${problem} (set SLOTWHEEL_TEST_REQUIRE_SERVERS=1 to fail instead)` : false;

// ---- what the test started, for after() (and the exit handler) to stop ----

const rand = randomBytes(4).toString("hex");
const dbName = `swconsole_${rand}`;
const dbUser = `swc_${rand}`;
const dbPass = randomBytes(12).toString("hex");
const HOSTS = ["localhost", "127.0.0.1", "%"];
const accounts = HOSTS.map((h) => `'${dbUser}'@'${h}'`).join(", ");
const dropSQL = `DROP DATABASE IF EXISTS \`${dbName}\`; DROP USER IF EXISTS ${accounts}`;

let dir, redis, server, serverLog = "", base, browser, paymentSecret, dbCreated = false, failed = false;
const pages = [];
const pageErrors = [];

// Whatever ends the process, the children and the database go with it.
process.once("exit", () => {
  for (const child of [server, redis]) if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  if (dbCreated) {
    try {
      execFileSync(sqlClient, sqlArgs(dropSQL), { env: sqlEnv, timeout: 10_000, stdio: "ignore" });
    } catch {
      // nothing more can be done on the way out
    }
  }
});


/** Starts a child and resolves once its output says ready; rejects (with the output) if it exits first. */
function startChild(cmd, args, opts, ready, what) {
  const child = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const started = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 60 s:\n${log}`)), 60_000);
    const onData = (c) => {
      log += c;
      if (log.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}):\n${log}`));
    });
    child.once("error", reject);
  });
  return { child, started, log: () => log };
}

async function stopChild(child, what) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const timer = setTimeout(() => {
    console.error(`${what} did not stop within 15 s of SIGTERM; killing it`);
    child.kill("SIGKILL");
  }, 15_000);
  await exited;
  clearTimeout(timer);
}

before(async () => {
  if (skip) return;
  if (problem) throw new Error(`SLOTWHEEL_TEST_REQUIRE_SERVERS=1 but ${problem}`);
  mkdirSync(shots, { recursive: true });
  mkdirSync(failureShots, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), "slotwheel-console-e2e-"));
  let bin = process.env.SLOTWHEEL_BIN;
  if (!bin) {
    bin = join(dir, "slotwheel");
    execFileSync("go", ["build", "-o", bin, "."], { cwd: repo, stdio: "inherit" });
  }

  // A Redis of its own: Asynq's queue names are fixed, so a shared one would mix other tests' tasks in.
  const redisPort = await freePort();
  const r = startChild("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {}, "Ready to accept connections", "redis-server");
  redis = r.child;
  await r.started;

  // A database and a user of its own. The user gets every privilege on the database, but UPDATE
  // table by table once the schema exists: a database-wide privilege is cached by each connection
  // (until its next USE), a table's is checked at every statement, so that step 7 can take UPDATE
  // on bookings away from the running binary and give it back.
  await sql(`CREATE DATABASE \`${dbName}\` CHARACTER SET utf8mb4`);
  dbCreated = true;
  await sql(HOSTS.map((h) => `CREATE USER '${dbUser}'@'${h}' IDENTIFIED BY '${dbPass}'; GRANT ALL ON \`${dbName}\`.* TO '${dbUser}'@'${h}'`).join("; "));

  const port = await freePort();
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SLOTWHEEL_")));
  const env = {
    ...inherited,
    SLOTWHEEL_HTTP_ADDR: `127.0.0.1:${port}`,
    SLOTWHEEL_MYSQL_DSN: `${dbUser}:${dbPass}@tcp(${adminDb.host}:${adminDb.port})/${dbName}?parseTime=true&loc=UTC`,
    SLOTWHEEL_REDIS_URL: `redis://127.0.0.1:${redisPort}/0`,
    SLOTWHEEL_AUTO_MIGRATE: "true",
    SLOTWHEEL_DEV_LOGIN: "true",
    SLOTWHEEL_DEV_PAYMENTS: "true",
    SLOTWHEEL_JWT_SECRET: randomBytes(24).toString("hex"),
    SLOTWHEEL_PAYMENT_SECRET: (paymentSecret = randomBytes(24).toString("hex")),
    SLOTWHEEL_DASHBOARD_PASSWORD: randomBytes(24).toString("hex"),
    SLOTWHEEL_CHECKIN_OPENS: "2h", // step 8 checks in a booking of the next slot, up to 2 hours ahead
  };
  try {
    await run(bin, ["migrate"], { env, timeout: 60_000 });
  } catch (err) {
    throw new Error(`slotwheel migrate failed: ${err.stdout}${err.stderr}`);
  }
  const tables = (await sql(`SELECT table_name FROM information_schema.tables WHERE table_schema = '${dbName}'`)).split("\n").filter(Boolean);
  assert.ok(tables.includes("bookings"), `the schema has a bookings table (tables: ${tables.join(", ")})`);
  await sql(
    [
      ...tables.map((t) => `GRANT UPDATE ON \`${dbName}\`.\`${t}\` TO ${accounts}`),
      `REVOKE UPDATE ON \`${dbName}\`.* FROM ${accounts}`,
    ].join("; "),
  );

  const s = startChild(bin, ["all"], { env }, "slotwheel is listening on", "slotwheel");
  server = s.child;
  serverLog = s.log;
  await s.started;
  base = `http://127.0.0.1:${port}`;
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--no-sandbox"] });
});

after(async () => {
  if (failed) {
    for (const [i, p] of pages.entries()) {
      await p.screenshot({ path: join(failureShots, `console-last-${i}.png`), fullPage: true }).catch(() => undefined);
    }
    if (serverLog) {
      writeFileSync(join(failureShots, "console-slotwheel.log"), serverLog());
      console.error(`slotwheel's log: ${join(failureShots, "console-slotwheel.log")}; its warnings and errors (the last 40):\n${serverLog().split("\n").filter((l) => !l.includes("level=INFO")).slice(-40).join("\n")}`);
    }
  }
  await browser?.close().catch(() => undefined);
  await stopChild(server, "slotwheel");
  await stopChild(redis, "redis-server");
  if (dbCreated) {
    await sql(dropSQL);
    dbCreated = false;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---- the API ----

const { call, login } = apiClient(() => base);

/** Polls fn until it answers something truthy; the server works on its own clock (release_at). */
async function until(what, fn, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${last ? ` (last error: ${last.message})` : ""}`);
    await sleep(200);
  }
}

/** The venue-local RFC 3339 form the API uses for a slot boundary. */
const local = (ms) => new Date(ms + OFFSET_MS).toISOString().slice(0, 19) + TZ;

/**
 * The grid the court gets: the first slot length whose slot in progress lasts NEED_MS more (slots
 * are laid from 00:00 and none crosses midnight), and that slot's start and end. Null in the last
 * minutes of the venue's day.
 */
function pickGrid(now) {
  const dayStart = now - ((now + OFFSET_MS) % 86_400_000);
  for (const minutes of SLOT_CHOICES) {
    const len = minutes * 60_000;
    const start = dayStart + Math.floor((now - dayStart) / len) * len;
    const end = start + len;
    if (end <= dayStart + 86_400_000 && end - now >= NEED_MS) {
      const next = end + len <= dayStart + 86_400_000 ? end : dayStart + 86_400_000;
      return { minutes, start, end, next };
    }
  }
  return null;
}

// ---- the browser ----

async function context(opts) {
  const ctx = await browser.newContext({ locale: "zh-CN", ...opts });
  return ctx;
}

async function newPage(ctx, label) {
  const page = await ctx.newPage();
  page.on("pageerror", (err) => pageErrors.push(`${label}: ${err.message}`));
  pages.push(page);
  return page;
}

/** A laptop at the desk or in the office. */
async function laptop(label, timezoneId = "Asia/Shanghai") {
  return newPage(await context({ viewport: { width: 1280, height: 800 }, timezoneId }), label);
}

/** A phone for the H5 app, its clock in Los Angeles (the app must show the venue's days anyway). */
async function phone(label) {
  return newPage(await context({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, timezoneId: "America/Los_Angeles", isMobile: true, hasTouch: true }), label);
}

const $ = (page, test) => page.locator(`[data-test="${test}"]`);

/** Scrolls the page so that the element starts just under the console's top bar. */
async function scrollToTop(locator) {
  await locator.evaluate((el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 72));
}

async function shot(page, name, opts = {}) {
  await page.screenshot({ path: join(shots, `console-${name}.png`), ...opts });
}

/** The console's banner showing text (the message of the action just taken). */
async function banner(page, text) {
  const toast = page.locator('[data-test="toast"]').filter({ hasText: text });
  await toast.waitFor();
  return toast;
}

/** Signs in on the console's dev log-in form. */
async function consoleLogin(page, userId, role, venueId) {
  await page.goto(`${base}/admin/`);
  await $(page, "login-dev-form").waitFor();
  await $(page, "login-user").fill(userId);
  await $(page, "login-role").selectOption(role);
  if (venueId) await $(page, "login-venue").selectOption(venueId);
  await $(page, "login-dev-submit").click();
  await $(page, "nav-board").waitFor();
  assert.match(await $(page, "who").innerText(), new RegExp(userId));
}

/** Opens a console page from the side menu and waits for what it shows. */
async function nav(page, name, ready) {
  await $(page, `nav-${name}`).click();
  await page.locator(`[data-test="nav-${name}"].active`).waitFor();
  if (ready) await page.locator(ready).first().waitFor();
}

const devLoginApp = (page, name) => appLogin(base, page, name);

/** The payment provider's signed notification that a hold was paid (docs/API.md); answers the booking. */
async function providerPays(hold) {
  const body = JSON.stringify({ hold_id: hold.hold_id, payment_id: `e2e-pay-${rand}-${hold.hold_id}`, amount_cents: hold.amount_cents, paid_at: new Date().toISOString() });
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", paymentSecret).update(`${ts}.${body}`).digest("hex");
  const res = await fetch(`${base}/api/v1/payments/notify`, { method: "POST", headers: { "Content-Type": "application/json", "X-Slotwheel-Signature": `t=${ts},v1=${sig}` }, body });
  const answer = await res.json();
  assert.equal(res.status, 200, `payment notification: ${JSON.stringify(answer)}`);
  assert.ok(answer.booking, `the payment booked the hold: ${JSON.stringify(answer)}`);
  return answer.booking;
}

/**
 * A guest books the slot starting at startMs on the H5 app and pays: with the app's dev payment
 * button, or (provider) through the payment provider's notification, which leaves a payment to
 * refund. Answers the booking id, once the app's booking page shows it waiting for approval.
 */
async function guestBooks(page, resourceId, startMs, { provider = false } = {}) {
  await page.goto(`${base}/app/#/pages/resource/index?id=${resourceId}`);
  await page.locator(`.date[data-date="${local(startMs).slice(0, 10)}"]`).click();
  const slot = page.locator(`.slot[data-start="${local(startMs)}"]`);
  await slot.waitFor();
  assert.match(await slot.innerText(), /可约/, "the slot in progress can be booked");
  await slot.click();
  const held = page.waitForResponse((r) => r.url().endsWith("/api/v1/holds") && r.request().method() === "POST");
  await page.locator(".confirm").click();
  const hold = await (await held).json();
  await page.locator(".countdown").waitFor();
  await page.locator('.hold .btn[disabled="false"]').first().waitFor();
  if (provider) {
    const b = await providerPays(hold);
    await page.goto(`${base}/app/#/pages/booking/index?id=${b.booking_id}`);
  } else {
    await page.getByText(/模拟支付/).click();
  }
  await page.waitForFunction(() => location.hash.includes("pages/booking/index"));
  await page.locator(".status").first().getByText("等待审核").waitFor();
  const id = /[?&]id=(\d+)/.exec(await page.evaluate(() => location.hash))?.[1];
  assert.ok(id, "the booking page names its booking");
  return id;
}

/** Runs one step; a failure names the step. */
async function step(name, fn) {
  try {
    return await fn();
  } catch (err) {
    failed = true;
    err.message = `step "${name}" failed: ${err.message}`;
    throw err;
  }
}

test("a venue's day on the operator console: set-up, approvals, board, a no-show, an appeal, a dead-lettered release re-driven", { skip }, async (t) => {
  const admin = await login({ user_id: "ops", role: "admin" });
  let venueId, resourceId, grid;

  // 1. The admin sets the venue up on the console.
  const office = await laptop("admin", "UTC");
  await step("1. admin sets up the venue, the court, its hours and rules, and the grace", async () => {
    await consoleLogin(office, "ops", "admin");
    await nav(office, "catalog", '[data-test="venue-create-open"]');
    await $(office, "venue-create-open").click();
    const venueForm = $(office, "venue-create-form");
    await venueForm.locator('[data-test="input-name"]').fill(VENUE);
    assert.equal(await venueForm.locator('[data-test="input-timezone"]').inputValue(), "Asia/Shanghai");
    await $(office, "venue-create-submit").click();
    await banner(office, `已创建场馆“${VENUE}”`);
    const venueRow = $(office, "venue-row").filter({ hasText: VENUE });
    venueId = await venueRow.getAttribute("data-id");
    assert.match(venueId, /^\d+$/);

    // The court, first with capacity 0: the API's own message shows under the capacity field.
    await $(office, "resource-create-open").click();
    const resForm = $(office, "resource-create-form");
    await resForm.locator('[data-test="input-name"]').fill(RESOURCE);
    await resForm.locator('[data-test="input-kind"]').fill("court");
    await resForm.locator('[data-test="input-category"]').fill(CATEGORY);
    await resForm.locator('[data-test="input-capacity"]').fill("0");
    await resForm.locator('[data-test="input-price"]').fill("80");
    const refused = office.waitForResponse((r) => r.url().endsWith("/api/v1/admin/resources") && r.request().method() === "POST");
    await $(office, "resource-create-submit").click();
    const answer = await refused;
    assert.ok(answer.status() >= 400 && answer.status() < 500, `capacity 0 is refused (got ${answer.status()})`);
    const { error } = await answer.json();
    assert.equal(error.field, "capacity");
    const capError = resForm.locator('[data-test="error-capacity"]');
    await capError.waitFor();
    // The API's message, beside the field it names (which the message itself names for clients
    // that show it alone; under the field the console leaves that out).
    const shown = (await capError.innerText()).trim();
    assert.ok(shown.length > 0 && error.message.startsWith(shown), `the API's message "${error.message}" beside the capacity field (shown: "${shown}")`);
    assert.equal(shown, error.message.replace(/（字段：capacity）$/, ""));
    assert.equal(await resForm.locator('[data-test="error-name"]').isVisible(), false, "no other field is blamed");
    await resForm.scrollIntoViewIfNeeded();
    await shot(office, "03-error");

    await resForm.locator('[data-test="input-capacity"]').fill("2");
    await $(office, "resource-create-submit").click();
    await banner(office, `已创建资源“${RESOURCE}”`);
    await office.waitForFunction(() => /#\/catalog\/resource\/\d+/.test(location.hash));
    resourceId = /resource\/(\d+)/.exec(await office.evaluate(() => location.hash))[1];

    // Opening hours: every day 00:00–24:00. The slot length is one whose slot in progress lasts the
    // test out (60 minutes unless the hour is nearly over); in a day's last minutes, wait for the next.
    grid = pickGrid(Date.now());
    if (!grid) {
      const wait = 86_400_000 - ((Date.now() + OFFSET_MS) % 86_400_000) + 1000;
      t.diagnostic(`the venue's day ends in ${Math.round(wait / 1000)} s: no slot in progress lasts the test; waiting for the next day`);
      await sleep(wait);
      grid = pickGrid(Date.now());
    }
    t.diagnostic(`${grid.minutes}-minute slots; the slot in progress is ${local(grid.start)}–${local(grid.end).slice(11, 16)}`);
    const hours = $(office, "schedule-form");
    await hours.waitFor();
    await hours.locator('[data-test="input-slot_minutes"]').fill(String(grid.minutes));
    const weekly = hours.locator('[data-test="weekly-row"]').first();
    for (let d = 1; d <= 7; d++) await weekly.locator(`[data-test="weekday-${d}"]`).check();
    await weekly.locator('[data-test="input-open"]').fill("00:00");
    await weekly.locator('[data-test="input-close"]').fill("24:00");
    await $(office, "schedule-submit").click();
    await banner(office, "营业时间已保存");

    // Booking rules: approval needed, 30 minutes to decide.
    const rules = $(office, "policy-form");
    await rules.locator('[data-test="input-requires_approval"]').check();
    await rules.locator('[data-test="input-approval_window_minutes"]').fill(String(APPROVAL_WINDOW_MIN));
    await $(office, "policy-submit").click();
    await banner(office, "预约规则已保存");
    assert.equal(await $(office, "policy-form").locator('[data-test="input-requires_approval"]').isChecked(), true);

    const schedule = await call("GET", `/api/v1/admin/resources/${resourceId}/schedule`, admin);
    assert.equal(schedule.slot_minutes, grid.minutes);
    assert.deepEqual(schedule.weekly, [{ weekdays: [1, 2, 3, 4, 5, 6, 7], open: "00:00", close: "24:00" }]);
    const policy = await call("GET", `/api/v1/resources/${resourceId}/policy`, admin);
    assert.equal(policy.requires_approval, true);
    assert.equal(policy.approval_window_minutes, APPROVAL_WINDOW_MIN);
    await shot(office, "02-resource", { fullPage: true });

    // Grace for the category: the form takes minutes, with decimals (0.25 = 15 s).
    await nav(office, "policies", '[data-test="grace-new-open"]');
    await $(office, "grace-new-open").click();
    const graceForm = office.locator('[data-test="grace-form"][data-category=""]');
    await graceForm.locator('[data-test="input-category"]').fill(CATEGORY);
    await graceForm.locator('[data-test="input-grace"]').fill(GRACE_MINUTES);
    await graceForm.locator('[data-test="grace-submit"]').click();
    await banner(office, `“${CATEGORY}”的宽限期已保存`);
    const graces = await call("GET", "/api/v1/admin/policies/grace", admin);
    assert.equal(graces.items.find((g) => g.category === CATEGORY)?.grace_seconds, GRACE_S);

    await nav(office, "catalog", '[data-test="resource-row"]');
    const row = $(office, "resource-row").filter({ hasText: RESOURCE });
    assert.match(await row.innerText(), new RegExp(`${CATEGORY}[\\s\\S]*2[\\s\\S]*¥80\\.00[\\s\\S]*${grid.minutes}`));
    await $(office, "resources-table").scrollIntoViewIfNeeded();
    await shot(office, "01-catalog");
  });

  // 2. Two guests book the slot in progress on the H5 app: paid, waiting for the venue.
  const ids = {};
  await step("2. alice and bob book the slot in progress on the H5 app and wait for approval", async () => {
    const alicePhone = await phone("alice (H5)");
    await devLoginApp(alicePhone, "alice");
    ids.alice = await guestBooks(alicePhone, resourceId, grid.start);
    assert.match(await alicePhone.locator(".notice").first().innerText(), /审核/);
    // The booking's card and its history; the rest of the phone's screen is empty.
    const height = await alicePhone.evaluate(() => Math.ceil(Math.max(...[...document.querySelectorAll(".card")].map((c) => c.getBoundingClientRect().bottom))) + 24);
    await shot(alicePhone, "04-guest-awaiting-approval", { clip: { x: 0, y: 0, width: 390, height: Math.min(height, 844) } });
    const bobPhone = await phone("bob (H5)");
    await devLoginApp(bobPhone, "bob");
    ids.bob = await guestBooks(bobPhone, resourceId, grid.start, { provider: true }); // a payment to refund
    for (const who of ["alice", "bob"]) {
      const b = await call("GET", `/api/v1/bookings/${ids[who]}`, admin);
      assert.equal(b.status, "PENDING_APPROVAL", `${who}'s booking waits for approval`);
      assert.equal(b.user_id, who);
    }
  });

  // 3. The venue's staff decide.
  const desk = await laptop("staff");
  await step("3. staff approve alice's booking and decline bob's with a reason", async () => {
    await consoleLogin(desk, "desk-1", "staff", venueId);
    assert.equal((await $(desk, "venue-name").innerText()).trim(), VENUE);
    await nav(desk, "approvals", '[data-test="approvals"]');
    const aliceRow = desk.locator(`[data-test="booking-row"][data-id="${ids.alice}"]`);
    const bobRow = desk.locator(`[data-test="booking-row"][data-id="${ids.bob}"]`);
    await aliceRow.waitFor();
    await bobRow.waitFor();
    assert.equal(await $(desk, "booking-row").count(), 2);
    assert.match(await aliceRow.innerText(), /alice/);
    assert.match(await bobRow.locator('[data-test="approval-deadline"]').innerText(), /还剩/);

    // Declining needs a reason: the API says so beside the reason field.
    await bobRow.locator('[data-test="action-decline"]').click();
    const reasonError = bobRow.locator('[data-test="error-reason"]');
    await reasonError.waitFor();
    assert.match(await reasonError.innerText(), /原因/);
    await shot(desk, "05-approvals");

    await bobRow.locator('[data-test="reason"]').fill(DECLINE);
    await bobRow.locator('[data-test="action-decline"]').click();
    await banner(desk, "预约现在是“已拒绝”");
    await bobRow.waitFor({ state: "detached" });
    await aliceRow.locator('[data-test="action-approve"]').click();
    await banner(desk, "预约现在是“已确认”");
    await $(desk, "approvals-empty").waitFor();

    const alice = await call("GET", `/api/v1/bookings/${ids.alice}`, admin);
    const bob = await call("GET", `/api/v1/bookings/${ids.bob}`, admin);
    assert.equal(alice.status, "CONFIRMED");
    assert.equal(bob.status, "DECLINED");
    const bobHistory = (await call("GET", `/api/v1/bookings/${ids.bob}/history`, admin)).items;
    assert.ok(bobHistory.some((h) => h.to === "DECLINED" && h.reason.includes(DECLINE) && h.actor.includes("desk-1")), `bob's history has the reason: ${JSON.stringify(bobHistory)}`);
    const refunds = (await call("GET", "/api/v1/admin/refunds", admin)).items;
    const refund = refunds.find((r) => r.booking_id === ids.bob);
    assert.ok(refund, `a refund for bob's booking: ${JSON.stringify(refunds)}`);
    assert.equal(refund.amount_cents, 8000);
    assert.equal(refund.reason, "approval_declined");
    assert.ok(!refunds.some((r) => r.booking_id === ids.alice), "none for alice's");
  });

  // 4. The board.
  await step("4. the board shows alice's booking in its slot, by day and by week", async () => {
    await nav(desk, "board", '[data-test="board-day"]');
    const chip = desk.locator(`[data-test="board-slot"][data-start="${local(grid.start)}"] [data-test="board-booking"][data-id="${ids.alice}"]`);
    await chip.waitFor();
    assert.match(await chip.innerText(), /alice/);
    assert.equal(await desk.locator(`[data-test="board-booking"][data-id="${ids.bob}"]`).count(), 0, "a declined booking is hidden by default");
    await chip.scrollIntoViewIfNeeded();
    await shot(desk, "06-board");
    await $(desk, "board-view-week").click();
    const weekChip = desk.locator(`[data-test="board-week-cell"][data-date="${local(grid.start).slice(0, 10)}"] [data-test="board-booking"][data-id="${ids.alice}"]`);
    await weekChip.waitFor();
    await shot(desk, "07-board-week");
  });

  // 5. Alice does not come: released at release_at, never before.
  let alice;
  await step("5. alice's booking is released at release_at, and its page says so", async () => {
    const { release_at: releaseAt } = await call("GET", `/api/v1/bookings/${ids.alice}`, admin);
    alice = await until(
      "alice's booking to be RELEASED",
      async () => {
        const b = await call("GET", `/api/v1/bookings/${ids.alice}`, admin);
        if (b.status !== "RELEASED") assert.ok(["CONFIRMED"].includes(b.status), `alice's booking is ${b.status}`);
        else assert.ok(Date.now() >= Date.parse(releaseAt), "not released before its release_at");
        return b.status === "RELEASED" && b;
      },
      (GRACE_S + 30) * 1000,
    );
    assert.ok(Date.parse(alice.released_at) >= Date.parse(releaseAt), `released at ${alice.released_at}, not before ${releaseAt}`);
    await desk.goto(`${base}/admin/#/booking/${ids.alice}`);
    await desk.locator('[data-test="booking-status"] [data-status="RELEASED"]').waitFor();
    await $(desk, "action-restore").waitFor();
  });

  // 6. She appeals at the desk: found by her code, restored with a reason.
  await step("6. staff find alice's booking by its code and restore it on appeal", async () => {
    await nav(desk, "bookings", '[data-test="search"]');
    await $(desk, "search").fill(alice.checkin_code.toLowerCase()); // as read out at the desk
    await $(desk, "search-submit").click();
    const row = desk.locator(`[data-test="booking-row"][data-id="${ids.alice}"]`);
    await row.waitFor();
    assert.equal(await $(desk, "booking-row").count(), 1, "the code names one booking");
    await row.click();
    await desk.locator('[data-test="booking-status"] [data-status="RELEASED"]').waitFor();
    await $(desk, "reason").fill(APPEAL);
    await $(desk, "action-restore").click();
    await banner(desk, "预约现在是“已确认”");
    await desk.locator('[data-test="booking-status"] [data-status="CONFIRMED"]').waitFor();
    await desk.locator('[data-test="history-row"]').filter({ hasText: APPEAL }).waitFor();
    await shot(desk, "08-booking-restored", { fullPage: true });
  });

  // 7. The new release fails, is dead-lettered, and is re-driven from the Operations page.
  await step("7. a release that fails is archived, fails again when re-driven, and is done once UPDATE is back", async () => {
    // Before it falls due, the binary's user loses UPDATE on bookings: every release of it fails.
    await sql(`REVOKE UPDATE ON \`${dbName}\`.\`bookings\` FROM ${accounts}`);
    const restored = await call("GET", `/api/v1/bookings/${ids.alice}`, admin);
    assert.equal(restored.status, "CONFIRMED");
    const releaseAt = Date.parse(restored.release_at);
    assert.ok(releaseAt > Date.now(), `the new release_at (${restored.release_at}) is still ahead when UPDATE is revoked`);
    const history = (await call("GET", `/api/v1/bookings/${ids.alice}/history`, admin)).items;
    assert.ok(history.some((h) => h.from === "RELEASED" && h.to === "CONFIRMED" && h.reason.includes(APPEAL) && h.actor.includes("desk-1")), `the history has the appeal: ${JSON.stringify(history)}`);

    const retrying = await until(
      "alice's release task among the retrying tasks",
      async () => (await call("GET", "/api/v1/admin/tasks?state=retry", admin)).items.find((x) => x.booking_id === ids.alice && x.last_error),
      (GRACE_S + 30) * 1000,
    );
    assert.match(retrying.last_error, /UPDATE command denied/);
    assert.ok(Date.now() >= releaseAt, "the release was not tried before release_at");

    // Archived as on the Asynq dashboard (its API, with the admin token). Between retries the task
    // may be running; then the archive is refused and tried again.
    const archiveUrl = `${base}/monitoring/api/queues/${encodeURIComponent(retrying.queue)}/retry_tasks/${encodeURIComponent(retrying.task_id)}:archive`;
    const dead = await until("the task to be archived", async () => {
      const res = await fetch(archiveUrl, { method: "POST", headers: { Authorization: `Bearer ${admin}` } });
      if (res.status !== 204 && res.status !== 200) throw new Error(`archive: ${res.status} ${await res.text()}`);
      return (await call("GET", "/api/v1/admin/tasks?state=archived", admin)).items.find((x) => x.task_id === retrying.task_id);
    });
    assert.equal(dead.state, "archived");
    assert.equal(dead.booking_id, ids.alice);

    await nav(office, "operations", '[data-test="tasks"]');
    const taskRow = office.locator(`[data-test="task-row"][data-id="${dead.task_id}"][data-state="archived"]`);
    await taskRow.waitFor();
    assert.match(await taskRow.locator('[data-test="booking-link"]').innerText(), new RegExp(`#${ids.alice}`));
    assert.match(await taskRow.innerText(), /UPDATE command denied/);
    await scrollToTop($(office, "ops-tasks"));
    await shot(office, "09-operations-dead-letter");

    // Re-driven while UPDATE is still revoked: it fails, and the page says why.
    let answer = office.waitForResponse((r) => r.url().includes(`/${encodeURIComponent(dead.task_id)}/redrive`));
    await taskRow.locator('[data-test="redrive"]').click();
    let redrive = await (await answer).json();
    assert.equal(redrive.done, false, `the re-drive fails while UPDATE is revoked: ${JSON.stringify(redrive)}`);
    const failure = office.locator('[data-test="toast"].toast-error');
    await failure.filter({ hasText: "重新执行仍然失败" }).waitFor();
    assert.match(await failure.innerText(), /UPDATE command denied/);
    await taskRow.waitFor(); // the page, reloaded, still lists the dead letter
    assert.equal((await call("GET", `/api/v1/bookings/${ids.alice}`, admin)).status, "CONFIRMED");

    // UPDATE back, re-driven again: done. The server's own overdue sweep may have released the
    // booking in between; then the re-drive finds nothing left to do.
    await sql(`GRANT UPDATE ON \`${dbName}\`.\`bookings\` TO ${accounts}`);
    answer = office.waitForResponse((r) => r.url().includes(`/${encodeURIComponent(dead.task_id)}/redrive`));
    await taskRow.locator('[data-test="redrive"]').click();
    const res = await answer;
    redrive = await res.json();
    if (res.status() === 404) {
      // The sweep released the booking and the archive's resolver deleted the dead letter first.
      t.diagnostic("the overdue sweep released the booking and resolved the dead letter before the second re-drive");
    } else {
      assert.equal(redrive.done, true, `the re-drive is done once UPDATE is back: ${JSON.stringify(redrive)}`);
      assert.ok(["released", "already_released", "not_needed", "settled"].includes(redrive.outcome), `outcome ${redrive.outcome}`);
      if (redrive.outcome !== "released") t.diagnostic(`re-drive outcome: ${redrive.outcome} (the server's own sweep released it first)`);
      await banner(office, "已重新执行");
    }
    await taskRow.waitFor({ state: "detached" });
    const released = await call("GET", `/api/v1/bookings/${ids.alice}`, admin);
    assert.equal(released.status, "RELEASED");
    assert.ok(Date.parse(released.released_at) >= releaseAt, `released at ${released.released_at}, not before ${restored.release_at}`);
    const archived = (await call("GET", "/api/v1/admin/tasks?state=archived", admin)).items;
    assert.ok(!archived.some((x) => x.task_id === dead.task_id), "the dead letter is gone");
    await shot(office, "10-redriven", { fullPage: true });
  });

  // 8. A third guest is approved and checked in at the desk; an admin looks a guest up.
  await step("8. carol is approved and checked in by code; the users page; the board on a tablet", async () => {
    const carol = await login({ user_id: "carol" });
    const hold = await call("POST", "/api/v1/holds", carol, { resource_id: resourceId, start: local(grid.next), end: local(grid.next + grid.minutes * 60_000) });
    const booking = await call("POST", `/api/v1/holds/${hold.hold_id}/confirm`, carol);
    assert.equal(booking.status, "PENDING_APPROVAL");
    await nav(desk, "approvals", '[data-test="approvals"]');
    await desk.locator(`[data-test="booking-row"][data-id="${booking.booking_id}"] [data-test="action-approve"]`).click();
    await banner(desk, "预约现在是“已确认”");
    await nav(desk, "bookings", '[data-test="quick-checkin-code"]');
    await $(desk, "quick-checkin-code").fill(booking.checkin_code);
    await $(desk, "quick-checkin-submit").click();
    await desk.locator(`.checkin-result [data-status="ARRIVED"]`).waitFor();
    assert.equal((await call("GET", `/api/v1/bookings/${booking.booking_id}`, admin)).status, "ARRIVED");

    await nav(office, "users", '[data-test="user-search"]');
    await $(office, "user-search").fill("alice");
    await $(office, "user-lookup-submit").click();
    await $(office, "user-noshows").waitFor();
    const standing = await call("GET", "/api/v1/admin/users/alice", admin);
    assert.equal((await $(office, "user-noshows").innerText()).trim(), String(standing.noshows));
    assert.ok(standing.noshows >= 1, "alice's releases count as no-shows");

    // The front desk's tablet: the board fits its width.
    const tablet = await newPage(await context({ viewport: { width: 1024, height: 768 }, timezoneId: "Asia/Shanghai", hasTouch: true }), "staff (tablet)");
    await consoleLogin(tablet, "desk-2", "staff", venueId);
    await tablet.locator(`[data-test="board-booking"][data-id="${booking.booking_id}"]`).waitFor();
    await tablet.locator(`[data-test="board-booking"][data-id="${ids.alice}"]`).waitFor();
    const overflow = await tablet.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the board fits a 1024-pixel tablet (${overflow} px too wide)`);
    await tablet.locator(`[data-test="board-slot"][data-start="${local(grid.start)}"]`).scrollIntoViewIfNeeded();
    await shot(tablet, "11-tablet-board");
  });

  assert.deepEqual(pageErrors, [], "no script errors on the pages");
});
