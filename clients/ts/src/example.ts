// A walk through the booking flow, written only to be type-checked (npx tsc --noEmit): if the
// document and the generated types drift apart, this stops compiling. It is not run by CI.
import {
  createClient,
  isError,
  type Booking,
  type ErrorCode,
  type Hold,
  type SlotwheelClient,
  type WechatPayParams,
} from "./index.js";

export async function bookAnHour(baseUrl: string): Promise<Booking | undefined> {
  const anonymous = createClient({ baseUrl, language: "zh-CN" });

  // Log in (dev log-in; the mini-program uses POST /api/v1/auth/wechat with its wx.login code).
  const login = await anonymous.POST("/api/v1/auth/dev-login", { body: { user_id: "alice" } });
  if (login.error) {
    throw new Error(login.error.error.message);
  }
  const token: string = login.data.token;
  const api = createClient({ baseUrl, token, language: "zh-CN" });

  // Browse: no token needed. A resource's slots are that resource's (a service with roles answers
  // each start once, without resource_id, so the hold below names the resource it asked about).
  const resourceId = "7";
  const day = await anonymous.GET("/api/v1/availability", {
    params: { query: { resource_id: resourceId, date: "2025-05-01" } },
  });
  const free = day.data?.slots.find((s) => s.available && s.remaining > 0);
  if (!free) {
    return undefined;
  }

  // Hold the slot; the Idempotency-Key makes a retry after a timeout safe.
  const held = await api.POST("/api/v1/holds", {
    params: { header: { "Idempotency-Key": "9b2f6a1e-hold-1" } },
    body: { resource_id: resourceId, start: free.start, end: free.end, quantity: 1 },
  });
  if (held.error) {
    // The error body's code is a union of every code the server answers with.
    const code: ErrorCode = held.error.error.code;
    if (code === "slot_full" || isError(held.error, "off_grid", "slot_past")) {
      return undefined;
    }
    throw new Error(`${code}: ${held.error.error.message}`);
  }
  const hold: Hold = held.data;
  const status: "HELD" | "CONFIRMING" | "CONFIRMED" | "EXPIRED" | "CANCELLED" = hold.status;
  void status;

  // Pay (dev payments stand in for the provider's notification in trials).
  const confirmed = await api.POST("/api/v1/holds/{id}/confirm", {
    params: { path: { id: hold.hold_id } },
  });
  if (confirmed.error) {
    if (isError(confirmed.error, "hold_expired")) {
      return undefined;
    }
    throw new Error(confirmed.error.error.message);
  }

  // Read it back, as the booking page does.
  const booking = await api.GET("/api/v1/bookings/{id}", {
    params: { path: { id: confirmed.data.booking_id } },
  });
  if (booking.error) {
    throw new Error(booking.error.error.message);
  }
  const releaseAt: string = booking.data.release_at;
  const code: string = booking.data.checkin_code;
  void releaseAt;
  void code;
  return booking.data;
}

// In the mini-program a user who logged in through WeChat pays a hold with WeChat Pay: the answer is
// exactly what wx.requestPayment takes; the payment's notification then books the hold.
export async function payWithWechat(api: SlotwheelClient, hold: Hold): Promise<WechatPayParams | undefined> {
  const r = await api.POST("/api/v1/holds/{id}/wechatpay", { params: { path: { id: hold.hold_id } } });
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

// Move a booking to another hour, if the resource's policy still allows it.
export async function moveAnHour(
  api: SlotwheelClient,
  booking: Booking,
  start: string,
  end: string,
): Promise<Booking | undefined> {
  const policy = await api.GET("/api/v1/resources/{id}/policy", { params: { path: { id: booking.resource_id } } });
  if (policy.data && policy.data.max_reschedules === 0) {
    return undefined;
  }
  const moved = await api.POST("/api/v1/bookings/{id}/reschedule", {
    params: {
      path: { id: booking.booking_id },
      header: { "Idempotency-Key": `move-${booking.booking_id}-${booking.version}` },
    },
    body: { start, end },
  });
  if (moved.error) {
    if (isError(moved.error, "slot_full", "reschedule_closed", "reschedule_limit", "price_differs")) {
      return undefined;
    }
    throw new Error(moved.error.error.message);
  }
  // Same booking, new window and release time.
  const sameId: boolean = moved.data.booking_id === booking.booking_id;
  void sameId;
  return moved.data;
}

export async function cancel(api: ReturnType<typeof createClient>, bookingId: string): Promise<Booking> {
  const r = await api.POST("/api/v1/bookings/{id}/cancel", { params: { path: { id: bookingId } } });
  if (r.error) {
    throw new Error(r.error.error.code);
  }
  return r.data;
}

// The types refuse what the server refuses.
export async function mistakes(api: ReturnType<typeof createClient>): Promise<void> {
  // @ts-expect-error ids are strings: a JavaScript number cannot hold every 64-bit id.
  await api.POST("/api/v1/holds", { body: { resource_id: 7, start: "2025-05-01T18:00:00+08:00" } });
  // @ts-expect-error a hold needs a start.
  await api.POST("/api/v1/holds", { body: { resource_id: "7", quantity: 2 } });
  // @ts-expect-error a quantity is a number.
  await api.POST("/api/v1/holds", { body: { resource_id: "7", start: "2025-05-01T18:00:00+08:00", quantity: "2" } });
  // @ts-expect-error availability needs a date.
  await api.GET("/api/v1/availability", { params: { query: { resource_id: "7" } } });
  await api.POST("/api/v1/bookings/{id}/reschedule", {
    params: { path: { id: "1024" } },
    // @ts-expect-error a reschedule needs a start.
    body: { end: "2025-05-01T19:00:00+08:00" },
  });
  // @ts-expect-error there is no such route.
  await api.GET("/api/v1/holds/{id}/receipt", { params: { path: { id: "h1_5f0c2a9d3e7b11aa4c2d" } } });
  // @ts-expect-error not an error code the server has.
  const code: ErrorCode = "slot_taken";
  void code;
}
