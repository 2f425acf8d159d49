// Runs the client against a fresh slotwheel binary twice: through fetch, as a browser or Node does,
// and through a wx.request stand-in with fetch, Headers and FormData deleted, as a WeChat
// mini-program does. The stand-in has wx.request's contract (success with statusCode, data and
// header; fail with errMsg "request:fail ..."), sent over node:http.
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";

import { bookAndCheckIn, firstFreeSlot, hold, logIn, payInTrial, type Transport } from "../src/example.js";
import {
  checkinCodeFromScan,
  createClient,
  isError,
  isTransportError,
  TransportError,
  type SlotwheelClient,
  type WxRequestOptions,
} from "../src/index.js";
import { startServer, type Server } from "./server.js";

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** wxRequest behaves as wx.request does, on node:http: nothing of fetch is used. */
function wxRequest(o: WxRequestOptions): void {
  const req = httpRequest(o.url, { method: o.method, headers: o.header, timeout: o.timeout }, (res) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => {
      const all = Buffer.concat(chunks);
      const header: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) {
        header[k] = Array.isArray(v) ? v.join(", ") : String(v);
      }
      const data =
        o.responseType === "arraybuffer" ? all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength) : all.toString("utf8");
      o.success({ statusCode: res.statusCode ?? 0, data, header });
    });
  });
  req.on("timeout", () => {
    req.destroy();
    o.fail({ errMsg: "request:fail timeout" });
  });
  req.on("error", (e) => {
    if (!req.destroyed || !/socket hang up|aborted/.test(e.message)) {
      o.fail({ errMsg: `request:fail ${e.message}` });
    }
  });
  if (o.data !== undefined) {
    req.write(o.data);
  }
  req.end();
}

const venueZone = "Asia/Shanghai";

/** The date days after today in the venue's zone (which keeps no summer time), as availability takes it. */
function dayIn(days = 0): string {
  return new Intl.DateTimeFormat("en-CA", { timeZone: venueZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(
    new Date(Date.now() + days * 86400e3),
  );
}

/** The day the flow books: today, or tomorrow in the last minutes of a day, when today has no slot left worth paying for. */
async function bookingDay(api: Parameters<typeof firstFreeSlot>[0]): Promise<string> {
  const today = dayIn();
  return (await firstFreeSlot(api, resourceId, today)) ? today : dayIn(1);
}

let server: Server;
// A server that takes connections and never answers, for timeouts.
let silent: NetServer;
let silentUrl: string;
const sockets: Socket[] = [];
// A port nobody listens on, for refused connections.
let closedUrl: string;
let venueId: string;
let resourceId: string;

before(async () => {
  server = await startServer();
  silent = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const a = silent.address();
  silentUrl = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const c = closed.address();
  closedUrl = `http://127.0.0.1:${typeof c === "object" && c ? c.port : 0}`;
  await new Promise<void>((r) => closed.close(() => r()));

  // A venue of its own with one court open around the clock in 15-minute slots, so that a slot is
  // in progress or starting soon whenever the test runs and check-in is open for it. Tomorrow's
  // first slots stay free for a flow run in the last minutes of a day (bookingDay); holds that are
  // not checked in take slots the day after.
  const admin = await logIn(server.baseUrl, {}, { user_id: "ops", role: "admin" });
  const v = await admin.POST("/api/v1/admin/venues", { body: { name: "Client test", timezone: venueZone } });
  assert.ok(v.data, JSON.stringify(v.error));
  venueId = v.data.venue_id;
  const r = await admin.POST("/api/v1/admin/resources", {
    body: { venue_id: venueId, name: "Court 1", kind: "court", capacity: 1, category: "court", price_cents: 8000 },
  });
  assert.ok(r.data, JSON.stringify(r.error));
  resourceId = r.data.resource_id;
  const s = await admin.PUT("/api/v1/admin/resources/{id}/schedule", {
    params: { path: { id: resourceId } },
    body: { slot_minutes: 15, weekly: [{ weekdays: [1, 2, 3, 4, 5, 6, 7], open: "00:00", close: "24:00" }], horizon_days: 3 },
  });
  assert.ok(s.data, JSON.stringify(s.error));
});

after(async () => {
  sockets.forEach((s) => s.destroy());
  await new Promise<void>((r) => silent.close(() => r()));
  await server.stop();
});

const runtimes: { id: string; name: string; transport: () => Transport; setup?: () => () => void }[] = [
  { id: "fetch", name: "fetch", transport: () => ({}) },
  {
    id: "wx",
    name: "wx.request without fetch, Headers and FormData",
    transport: () => ({ request: wxRequest }),
    setup() {
      const g = globalThis as Record<string, unknown>;
      const saved = { fetch: g.fetch, Headers: g.Headers, FormData: g.FormData, Request: g.Request, Response: g.Response };
      for (const k of Object.keys(saved)) {
        delete g[k];
      }
      return () => Object.assign(g, saved);
    },
  },
];

for (const rt of runtimes) {
  describe(`through ${rt.name}`, () => {
    let restore: () => void = () => {};
    before(() => {
      restore = rt.setup?.() ?? (() => {});
    });
    after(() => restore());

    test("a guest books, pays, gets the QR code; the desk scans it, twice", async () => {
      assert.equal(typeof (globalThis as Record<string, unknown>).Headers, rt.setup ? "undefined" : "function");
      const guest = await logIn(server.baseUrl, rt.transport(), { user_id: `guest-${rt.id}` });
      const staff = await logIn(server.baseUrl, rt.transport(), { user_id: "desk", role: "staff", venue_id: venueId });

      const { booking, qr, arrived } = await bookAndCheckIn(guest, staff, resourceId, await bookingDay(guest), `book-${rt.id}`);
      assert.equal(booking.status, "CONFIRMED");
      assert.match(booking.checkin_code, /^[A-Z2-9]{8}$/);
      assert.deepEqual([...new Uint8Array(qr).slice(0, 8)], PNG_SIGNATURE, "the QR code is a PNG");
      assert.equal(arrived.status, "ARRIVED");
      assert.equal(arrived.booking_id, booking.booking_id);

      // A second beep at the gate, of a code typed by hand in lower case: the same booking, unchanged.
      const again = await staff.POST("/api/v1/checkins", { body: { checkin_code: checkinCodeFromScan(` ${booking.checkin_code.toLowerCase()} `) } });
      assert.equal(again.data?.status, "ARRIVED");
      assert.equal(again.data?.version, arrived.version);

      // The slot is taken now (capacity 1): another guest is told slot_full, in the language asked.
      const other = await logIn(server.baseUrl, rt.transport(), { user_id: `other-${rt.id}` });
      const held = await other.POST("/api/v1/holds", {
        body: { resource_id: resourceId, start: booking.start, end: booking.end },
      });
      assert.ok(isError(held.error, "slot_full"), JSON.stringify(held.error));
      assert.equal(held.status, 409);
      assert.match(held.headers["x-request-id"] ?? "", /.+/);
      assert.match(held.error.error.message, /[\u4e00-\u9fff]/, "zh-CN was asked for");

      // The booking's history tells what happened, as the booking page shows it.
      const history = await guest.GET("/api/v1/bookings/{id}/history", { params: { path: { id: booking.booking_id } } });
      assert.deepEqual(
        history.data?.items.map((h) => h.to),
        ["CONFIRMED", "ARRIVED"],
      );
    });

    test("without a token the answer is the typed error body; a token given later is used", async () => {
      let token: string | undefined;
      const api: SlotwheelClient = createClient({ baseUrl: server.baseUrl, ...rt.transport(), token: () => token, language: "en" });
      const denied = await api.GET("/api/v1/bookings");
      assert.equal(denied.status, 401);
      assert.ok(isError(denied.error, "unauthorized"));
      assert.match(denied.error.error.message, /^[\x20-\x7e]+$/, "en was asked for");

      const login = await api.POST("/api/v1/auth/dev-login", { body: { user_id: "later" } });
      token = login.data?.token;
      const mine = await api.GET("/api/v1/bookings");
      assert.deepEqual(mine.data?.items, []);
    });

    test("a hold from a free slot can be paid once the guest decides", async () => {
      const guest = await logIn(server.baseUrl, rt.transport(), { user_id: `payer-${rt.id}` });
      const slot = await firstFreeSlot(guest, resourceId, dayIn(2));
      assert.ok(slot);
      const h = await hold(guest, resourceId, slot, `hold-${rt.id}`);
      assert.ok(h);
      assert.equal(h.status, "HELD");
      assert.ok(Date.parse(h.expires_at) > Date.now(), "the countdown runs to a time ahead");
      const b = await payInTrial(guest, h);
      assert.equal(b.status, "CONFIRMED");
      assert.equal(b.hold_id, h.hold_id);
    });

    test("timeouts and refused connections are typed TransportErrors", async () => {
      const slow = createClient({ baseUrl: silentUrl, ...rt.transport(), timeout: 300 });
      await assert.rejects(slow.GET("/api/v1/venues"), (e: unknown) => {
        assert.ok(e instanceof TransportError);
        assert.equal(e.kind, "timeout");
        return true;
      });
      const refused = createClient({ baseUrl: closedUrl, ...rt.transport() });
      await assert.rejects(refused.GET("/api/v1/venues"), (e: unknown) => isTransportError(e, "network"));
    });
  });
}

test("the wx path needs no fetch at all, and the fetch path says so when there is none", async () => {
  const g = globalThis as Record<string, unknown>;
  const saved = g.fetch;
  delete g.fetch;
  try {
    const api = createClient({ baseUrl: server.baseUrl });
    await assert.rejects(api.GET("/api/v1/venues"), /no fetch here; pass request/);
    const wx = createClient({ baseUrl: server.baseUrl, request: wxRequest });
    const venues = await wx.GET("/api/v1/venues");
    assert.ok(venues.data?.items.some((v) => v.venue_id === venueId));
  } finally {
    g.fetch = saved;
  }
});
