// The booking flow as a mini-program drives it: browse, hold, pay, show the QR code, check in at the
// desk. CI runs it (test/client.test.ts) against a fresh binary, once through fetch and once through a
// wx.request stand-in with fetch, Headers and FormData deleted; the same functions type-check the
// contract, so a drift between the document and the types stops the build.
import {
  checkinCodeFromScan,
  checkinPayload,
  createClient,
  isError,
  type Booking,
  type ErrorCode,
  type Hold,
  type Slot,
  type SlotwheelClient,
  type SlotwheelOptions,
  type WechatPayParams,
} from "./index.js";

/** How the client reaches the server: fetch (the default) or a wx.request-shaped function. */
export type Transport = Pick<SlotwheelOptions, "request" | "fetch">;

/** logIn asks the dev log-in route for a token (embedded mode); a mini-program uses POST /api/v1/auth/wechat. */
export async function logIn(
  baseUrl: string,
  transport: Transport,
  who: { user_id: string; role?: "user" | "staff" | "admin"; venue_id?: string },
): Promise<SlotwheelClient> {
  const anonymous = createClient({ baseUrl, ...transport, language: "zh-CN" });
  const r = await anonymous.POST("/api/v1/auth/dev-login", { body: who });
  if (r.error) {
    throw new Error(`${r.error.error.code}: ${r.error.error.message}`);
  }
  return createClient({ baseUrl, ...transport, token: r.data.token, language: "zh-CN" });
}

/**
 * firstFreeSlot is the first slot of a resource's day that can be held and does not end within two
 * minutes (not worth paying for), if any. Browsing needs no token.
 */
export async function firstFreeSlot(api: SlotwheelClient, resourceId: string, date: string): Promise<Slot | undefined> {
  const worthIt = Date.now() + 2 * 60_000;
  const day = await api.GET("/api/v1/availability", { params: { query: { resource_id: resourceId, date } } });
  if (day.error) {
    throw new Error(`${day.error.error.code}: ${day.error.error.message}`);
  }
  return day.data.slots.find((s) => s.available && s.remaining > 0 && Date.parse(s.end) > worthIt);
}

/** hold takes a slot; slot_full (someone was quicker) answers undefined. */
export async function hold(api: SlotwheelClient, resourceId: string, slot: Slot, key: string): Promise<Hold | undefined> {
  const held = await api.POST("/api/v1/holds", {
    // The Idempotency-Key makes a retry after a timeout safe.
    params: { header: { "Idempotency-Key": key } },
    body: { resource_id: resourceId, start: slot.start, end: slot.end },
  });
  if (held.error) {
    const code: ErrorCode = held.error.error.code;
    if (code === "slot_full") {
      return undefined;
    }
    throw new Error(`${code}: ${held.error.error.message}`);
  }
  return held.data;
}

/** payInTrial confirms a hold through dev payments, standing in for the payment provider. */
export async function payInTrial(api: SlotwheelClient, h: Hold): Promise<Booking> {
  const r = await api.POST("/api/v1/holds/{id}/confirm", { params: { path: { id: h.hold_id } } });
  if (r.error) {
    throw new Error(`${r.error.error.code}: ${r.error.error.message}`);
  }
  return r.data;
}

/** checkinQR is the booking's QR code as a PNG (owner or the venue's staff). */
export async function checkinQR(api: SlotwheelClient, bookingId: string): Promise<ArrayBuffer> {
  const r = await api.GET("/api/v1/bookings/{id}/checkin.png", {
    params: { path: { id: bookingId } },
    parseAs: "arrayBuffer",
  });
  if (r.error) {
    throw new Error(`${r.error.error.code}: ${r.error.error.message}`);
  }
  return r.data;
}

/** scan checks in what the desk's scanner read: the QR payload or a typed code. */
export async function scan(staff: SlotwheelClient, scanned: string): Promise<Booking> {
  const r = await staff.POST("/api/v1/checkins", { body: { checkin_code: checkinCodeFromScan(scanned) } });
  if (r.error) {
    throw new Error(`${r.error.error.code}: ${r.error.error.message}`);
  }
  return r.data;
}

/** The whole guest-and-desk flow: hold the first free slot, pay, show the QR, check it in. */
export async function bookAndCheckIn(
  guest: SlotwheelClient,
  staff: SlotwheelClient,
  resourceId: string,
  date: string,
  key: string,
): Promise<{ booking: Booking; qr: ArrayBuffer; arrived: Booking }> {
  const slot = await firstFreeSlot(guest, resourceId, date);
  if (!slot) {
    throw new Error(`no free slot on ${date}`);
  }
  const held = await hold(guest, resourceId, slot, key);
  if (!held) {
    throw new Error("slot_full");
  }
  const booking = await payInTrial(guest, held);
  const qr = await checkinQR(guest, booking.booking_id);
  const arrived = await scan(staff, checkinPayload(booking.checkin_code));
  return { booking, qr, arrived };
}

// In the mini-program a user who logged in through WeChat pays a hold with WeChat Pay: the answer is
// exactly what wx.requestPayment takes; the payment's notification then books the hold.
export async function payWithWechat(api: SlotwheelClient, h: Hold): Promise<WechatPayParams | undefined> {
  const r = await api.POST("/api/v1/holds/{id}/wechatpay", { params: { path: { id: h.hold_id } } });
  if (r.error) {
    if (isError(r.error, "hold_expired", "hold_not_active", "wechat_login_required", "wechatpay_not_configured")) {
      return undefined;
    }
    throw new Error(r.error.error.message);
  }
  const timeStamp: string = r.data.timeStamp; // a string, as wx.requestPayment wants it
  void timeStamp;
  return r.data;
}

// The types refuse what the server refuses. Never called: it exists to be type-checked.
export async function mistakes(api: SlotwheelClient): Promise<void> {
  // @ts-expect-error ids are strings: a JavaScript number cannot hold every 64-bit id.
  await api.POST("/api/v1/holds", { body: { resource_id: 7, start: "2025-05-01T18:00:00+08:00", end: "2025-05-01T19:00:00+08:00" } });
  // @ts-expect-error a resource hold needs an end (the server would answer 400 missing_field).
  await api.POST("/api/v1/holds", { body: { resource_id: "7", start: "2025-05-01T18:00:00+08:00" } });
  // @ts-expect-error a hold needs a start.
  await api.POST("/api/v1/holds", { body: { service_id: "3", quantity: 2 } });
  // @ts-expect-error a quantity is a number.
  await api.POST("/api/v1/holds", { body: { service_id: "3", start: "2025-05-01T18:00:00+08:00", quantity: "2" } });
  // @ts-expect-error availability needs a date.
  await api.GET("/api/v1/availability", { params: { query: { resource_id: "7" } } });
  // @ts-expect-error a booking's path needs its id.
  await api.GET("/api/v1/bookings/{id}", {});
  // @ts-expect-error there is no such route.
  await api.GET("/api/v1/holds/{id}/receipt", { params: { path: { id: "h1_5f0c2a9d3e7b11aa4c2d" } } });
  // @ts-expect-error not an error code the server has.
  const code: ErrorCode = "slot_taken";
  void code;
}
