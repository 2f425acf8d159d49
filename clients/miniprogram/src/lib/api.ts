// The one client of the app, sending through Taro.request: wx.request on WeChat, fetch in H5.
import Taro from "@tarojs/taro";

import { createClient, isTransportError, type ErrorBody, type Venue, type WxRequest } from "@slotwheel/client";

import { errorText, lang, t } from "./i18n";

export interface Session {
  token: string;
  user_id: string;
  role: "user" | "staff" | "admin";
  venue_id?: string;
}

export function session(): Session | undefined {
  const s = Taro.getStorageSync("sw.session");
  return s && typeof s === "object" && "token" in s ? (s as Session) : undefined;
}

export function setSession(s: Session | undefined): void {
  if (s) {
    Taro.setStorageSync("sw.session", s);
  } else {
    Taro.removeStorageSync("sw.session");
  }
}

export const api = createClient({
  baseUrl: SLOTWHEEL_API_BASE,
  request: Taro.request as unknown as WxRequest,
  token: () => session()?.token,
  language: lang,
});

/** message is what to show for an error body or a thrown failure. */
export function message(e: unknown): string {
  if (isTransportError(e)) {
    return t(e.kind);
  }
  const body = e as ErrorBody | undefined;
  if (body && typeof body === "object" && "error" in body && body.error?.code) {
    return errorText(body.error.code, body.error.message);
  }
  return e instanceof Error ? e.message : String(e);
}

export function money(cents: number): string {
  return `¥${(cents / 100).toFixed(2)}`;
}

/** hm is the venue-local "HH:MM" of an RFC 3339 time, which the API gives in the venue's offset. */
export function hm(rfc3339: string): string {
  return rfc3339.slice(11, 16);
}

/** ymd is the venue-local date of an RFC 3339 time. */
export function ymd(rfc3339: string): string {
  return rfc3339.slice(0, 10);
}

/**
 * dayIn is the date daysAhead calendar days from today in a venue's zone, as availability and the desk
 * list take it: the venue's day, whatever zone the phone is set to (the phone's when Intl cannot say).
 * Days are added to the date, not as 24 hours, so that a day of summer time is neither skipped nor
 * counted twice.
 */
export function dayIn(timeZone: string | undefined, daysAhead = 0): string {
  const now = new Date();
  let today: string;
  try {
    today = new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(now);
  } catch {
    const p = (n: number) => String(n).padStart(2, "0");
    today = `${now.getFullYear()}-${p(now.getMonth() + 1)}-${p(now.getDate())}`;
  }
  const [y, m, d] = today.split("-").map(Number);
  return new Date(Date.UTC(y!, m! - 1, d! + daysAhead)).toISOString().slice(0, 10);
}

/** allVenues lists the venues, cached. */
export function allVenues(): Promise<Venue[]> {
  return cached("venues", async () => {
    const r = await api.GET("/api/v1/venues");
    if (r.error) throw r.error;
    return r.data.items as Venue[];
  });
}

/** Static data (venues, resources) is cached for a few minutes, as seed 001 asks. */
export async function cached<T>(key: string, load: () => Promise<T>, ttlMs = 5 * 60_000): Promise<T> {
  const hit = Taro.getStorageSync(`sw.cache.${key}`) as { at: number; value: T } | "";
  if (hit && Date.now() - hit.at < ttlMs) {
    return hit.value;
  }
  const value = await load();
  Taro.setStorageSync(`sw.cache.${key}`, { at: Date.now(), value });
  return value;
}

/** needLogin sends a guest to the log-in page and back here afterwards. */
export function needLogin(): boolean {
  if (session()) {
    return false;
  }
  const pages = Taro.getCurrentPages();
  const here = pages[pages.length - 1];
  const back = here ? `/${here.route}${query(here.options as Record<string, string>)}` : "/pages/index/index";
  void Taro.navigateTo({ url: `/pages/login/index?back=${encodeURIComponent(back)}` });
  return true;
}

function query(o: Record<string, string> | undefined): string {
  const parts = Object.entries(o ?? {})
    .filter(([k]) => k !== "$taroTimestamp")
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/**
 * pngDataUrl makes an <Image> source of PNG bytes. Own code rather than Taro.arrayBufferToBase64,
 * whose H5 version answered "" for the bytes Taro.request returned.
 */
export function pngDataUrl(buf: ArrayBuffer): string {
  const b = new Uint8Array(buf);
  let out = "";
  for (let i = 0; i < b.length; i += 3) {
    const n = (b[i]! << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    out += B64[(n >> 18) & 63]! + B64[(n >> 12) & 63]!;
    out += i + 1 < b.length ? B64[(n >> 6) & 63]! : "=";
    out += i + 2 < b.length ? B64[n & 63]! : "=";
  }
  return `data:image/png;base64,${out}`;
}
