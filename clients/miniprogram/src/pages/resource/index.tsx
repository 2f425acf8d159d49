// One resource: a date strip marking the days that still have free slots, the day's slot grid
// (可约 / 约满 / 不可约 with the reason), and the hold → pay flow with a countdown to expires_at.
import { Button, Text, View } from "@tarojs/components";
import Taro, { useDidShow, useRouter, useUnload } from "@tarojs/taro";
import { useEffect, useRef, useState } from "react";

import type { Hold, Resource, Slot } from "@slotwheel/client";

import { allVenues, api, cached, dayIn, hm, message, money, needLogin } from "../../lib/api";
import { t, type TextKey } from "../../lib/i18n";
import "./index.css";

const DAYS = 7;

/** The next days as YYYY-MM-DD in the venue's zone. */
function days(timeZone: string | undefined): string[] {
  return Array.from({ length: DAYS }, (_, i) => dayIn(timeZone, i));
}

const WEEKDAYS_ZH = ["日", "一", "二", "三", "四", "五", "六"];

export default function ResourcePage() {
  const { params } = useRouter();
  const id = params.id ?? "";
  const [resource, setResource] = useState<Resource>();
  const [dates, setDates] = useState<string[]>([]);
  const [freeDays, setFreeDays] = useState<Record<string, boolean>>({});
  const [date, setDate] = useState("");
  const [slots, setSlots] = useState<Slot[]>();
  const [picked, setPicked] = useState<Slot>();
  const [hold, setHold] = useState<Hold>();
  const [busy, setBusy] = useState<"" | "hold" | "pay" | "wait">("");
  const [left, setLeft] = useState(0);
  const [error, setError] = useState("");
  const [notice, setNotice] = useState("");
  const timer = useRef<ReturnType<typeof setInterval>>();

  async function loadDay(d: string) {
    const r = await api.GET("/api/v1/availability", { params: { query: { resource_id: id, date: d } } });
    if (r.error) throw r.error;
    return r.data.slots;
  }

  async function refresh(d: string) {
    try {
      const s = await loadDay(d);
      setSlots(s);
      setFreeDays((f) => ({ ...f, [d]: s.some((x) => x.available) }));
      setError("");
    } catch (e) {
      setError(message(e));
    }
  }

  useEffect(() => {
    void (async () => {
      try {
        const [resources, venues] = await Promise.all([
          cached("resources", async () => {
            const r = await api.GET("/api/v1/resources");
            if (r.error) throw r.error;
            return r.data.items;
          }),
          allVenues(),
        ]);
        const res = resources.find((r) => r.resource_id === id);
        setResource(res);
        const ds = days(venues.find((v) => v.venue_id === res?.venue_id)?.timezone);
        setDates(ds);
        setDate(ds[0]!);
        // The strip marks every day with a free slot: one availability call a day.
        const all = await Promise.all(ds.map((d) => loadDay(d).then((s) => [d, s.some((x) => x.available)] as const)));
        setFreeDays(Object.fromEntries(all));
      } catch (e) {
        setError(message(e));
      }
    })();
  }, [id]);

  useEffect(() => {
    if (date) {
      setPicked(undefined);
      void refresh(date);
    }
  }, [date]);

  useDidShow(() => {
    if (date) void refresh(date);
  });

  // The countdown to the hold's deadline; at zero the hold is gone and the grid is asked again.
  useEffect(() => {
    clearInterval(timer.current);
    if (!hold) return;
    const tick = () => {
      const s = Math.max(0, Math.round((Date.parse(hold.expires_at) - Date.now()) / 1000));
      setLeft(s);
      if (s === 0) {
        clearInterval(timer.current);
        setHold(undefined);
        setError(t("expired"));
        void refresh(date);
      }
    };
    tick();
    timer.current = setInterval(tick, 1000);
    return () => clearInterval(timer.current);
  }, [hold]);
  useUnload(() => clearInterval(timer.current));

  async function takeHold() {
    if (!picked || busy || needLogin()) return;
    setBusy("hold");
    setError("");
    try {
      const r = await api.POST("/api/v1/holds", {
        // One key per tap: a retry of this request after a timeout cannot take a second hold.
        params: { header: { "Idempotency-Key": `hold-${id}-${picked.start}-${Date.now()}` } },
        body: { resource_id: id, start: picked.start, end: picked.end },
      });
      if (r.error) {
        setError(message(r.error));
        void refresh(date);
        return;
      }
      setHold(r.data);
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy("");
    }
  }

  async function pay() {
    if (!hold || busy) return;
    setBusy("pay");
    setError("");
    try {
      let bookingId: string | undefined;
      if (process.env.TARO_ENV === "weapp") {
        // WeChat Pay: the server makes the JSAPI order and signs what wx.requestPayment takes; the
        // payment's notification books the hold, which is then read back.
        const p = await api.POST("/api/v1/holds/{id}/wechatpay", { params: { path: { id: hold.hold_id } } });
        if (p.error) throw p.error;
        await Taro.requestPayment({ ...p.data, signType: "RSA" });
        for (let i = 0; i < 20 && !bookingId; i++) {
          const h = await api.GET("/api/v1/holds/{id}", { params: { path: { id: hold.hold_id } } });
          if (h.error) throw h.error;
          bookingId = h.data.booking_id;
          if (!bookingId) await new Promise((r) => setTimeout(r, 500)); // the notification is on its way
        }
      } else {
        // The H5 demo runs on a server in embedded mode, where dev payments stand in for a provider.
        const b = await api.POST("/api/v1/holds/{id}/confirm", { params: { path: { id: hold.hold_id } } });
        if (b.error) throw b.error;
        bookingId = b.data.booking_id;
      }
      setHold(undefined);
      if (bookingId) {
        void Taro.redirectTo({ url: `/pages/booking/index?id=${bookingId}` });
      }
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy("");
    }
  }

  async function giveUp() {
    if (!hold) return;
    await api.DELETE("/api/v1/holds/{id}", { params: { path: { id: hold.hold_id } } }).catch(() => undefined);
    setHold(undefined);
    void refresh(date);
  }

  async function wait() {
    if (!picked || busy || needLogin()) return;
    setBusy("wait");
    try {
      const r = await api.POST("/api/v1/waitlist", { body: { resource_id: id, start: picked.start, end: picked.end } });
      if (r.error) setError(message(r.error));
      else setNotice(t("joinedWaitlist"));
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy("");
    }
  }

  // Slots already over are only counted: the grid starts at what can still be chosen.
  const upcoming = slots?.filter((s) => s.reason !== "past");
  const past = (slots?.length ?? 0) - (upcoming?.length ?? 0);
  const state = (s: Slot) => (s.available ? "open" : s.reason === "full" ? "full" : "off");
  const label = (s: Slot) =>
    s.available
      ? `${t("free")} · ${t("left", { n: s.remaining })}`
      : s.reason === "full"
        ? t("full")
        : `${t("unavailable")} · ${t(`reason_${s.reason ?? "closed"}` as TextKey)}`;

  return (
    <View className="page">
      <View className="bar">
        <Text className="title">{resource?.name ?? ""}</Text>
        {resource && <Text>{money(resource.price_cents)}</Text>}
      </View>
      {error && <View className="error">{error}</View>}
      {notice && <View className="notice">{notice}</View>}
      <View className="dates">
        {dates.map((d) => (
          <View
            key={d}
            className={`date ${d === date ? "on" : ""} ${freeDays[d] ? "free" : ""}`}
            data-date={d}
            onClick={() => !hold && setDate(d)}
          >
            <View className="muted" style={{ color: "inherit" }}>
              {WEEKDAYS_ZH[new Date(`${d}T12:00:00Z`).getUTCDay()]}
            </View>
            <View>{d.slice(5)}</View>
            <View className={`dot ${freeDays[d] ? "" : "none"}`} />
          </View>
        ))}
      </View>
      <View className="legend">
        <Text>
          <Text className="open">●</Text> {t("free")}
        </Text>
        <Text>
          <Text className="full">●</Text> {t("full")}
        </Text>
        <Text>
          <Text className="off">●</Text> {t("unavailable")}
        </Text>
      </View>
      {slots === undefined && <Text className="muted">{t("loading")}</Text>}
      {slots?.length === 0 && <Text className="muted">{t("noSlots")}</Text>}
      {past > 0 && <View className="muted past">{t("pastSlots", { n: past })}</View>}
      <View className="grid">
        {upcoming?.map((s) => (
          <View
            key={s.start}
            className={`slot ${state(s)} ${picked?.start === s.start ? "picked" : ""}`}
            data-start={s.start}
            onClick={() => !hold && (s.available || s.reason === "full") && setPicked(s)}
          >
            <View>
              {hm(s.start)}–{hm(s.end)}
            </View>
            <View className="state">{label(s)}</View>
          </View>
        ))}
      </View>
      <View className="actions">
      {hold ? (
        <View className="card hold">
          <View className="muted">{t("heldFor")}</View>
          <View className="countdown">
            {String(Math.floor(left / 60)).padStart(2, "0")}:{String(left % 60).padStart(2, "0")}
          </View>
          <View className="muted">
            {hm(hold.start)}–{hm(hold.end)} · {hold.start.slice(0, 10)}
          </View>
          <Button className="btn" disabled={busy !== ""} onClick={pay}>
            {busy === "pay" && <Text className="spinner" />}
            {busy === "pay"
              ? t("paying")
              : t(process.env.TARO_ENV === "weapp" ? "pay" : "payDev", { amount: money(hold.amount_cents) })}
          </Button>
          <Button className="btn ghost" disabled={busy !== ""} onClick={giveUp}>
            {t("giveUp")}
          </Button>
        </View>
      ) : picked && !picked.available ? (
        <Button className="btn ghost" disabled={busy !== ""} onClick={wait}>
          {busy === "wait" && <Text className="spinner" />}
          {t("joinWaitlist")} · {hm(picked.start)}–{hm(picked.end)}
        </Button>
      ) : (
        <Button className="btn confirm" disabled={!picked || busy !== ""} onClick={takeHold}>
          {busy === "hold" && <Text className="spinner" />}
          {busy === "hold" ? t("holding") : picked ? `${t("confirm")} · ${hm(picked.start)}–${hm(picked.end)}` : t("pickSlot")}
        </Button>
      )}
      </View>
    </View>
  );
}
