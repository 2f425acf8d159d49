// One booking: its status and history, the check-in QR code to show at the gate, and what the
// guest can still do: restore it after a no-show release, or cancel it with the refund its
// resource's policy gives.
import { Button, Image, Text, View } from "@tarojs/components";
import Taro, { useDidShow, useRouter } from "@tarojs/taro";
import { useState } from "react";

import type { Booking, HistoryEntry, Policy } from "@slotwheel/client";

import { api, hm, message, money, needLogin, pngDataUrl, ymd } from "../../lib/api";
import { t, type TextKey } from "../../lib/i18n";
import "./index.css";

/** The refund a user's cancel gets now under the resource's policy (docs/API.md, booking rules). */
function refundOf(b: Booking, p: Policy | undefined): { percent: number; cents: number } {
  const cutoff = Date.parse(b.start) - (p?.cancel_cutoff_minutes ?? 0) * 60_000;
  const percent = Date.now() < cutoff ? (p?.cancel_refund_percent ?? 100) : (p?.late_cancel_refund_percent ?? 100);
  return { percent, cents: Math.floor((b.amount_cents * percent) / 100) };
}

export default function BookingPage() {
  const { params } = useRouter();
  const id = params.id ?? "";
  const [b, setB] = useState<Booking>();
  const [history, setHistory] = useState<HistoryEntry[]>([]);
  const [policy, setPolicy] = useState<Policy>();
  const [qr, setQr] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [notice, setNotice] = useState("");

  async function load() {
    try {
      const [r, h] = await Promise.all([
        api.GET("/api/v1/bookings/{id}", { params: { path: { id } } }),
        api.GET("/api/v1/bookings/{id}/history", { params: { path: { id } } }),
      ]);
      if (r.error) throw r.error;
      setB(r.data);
      setHistory(h.data?.items ?? []);
      const p = await api.GET("/api/v1/resources/{id}/policy", { params: { path: { id: r.data.resource_id } } });
      setPolicy(p.data);
      // The QR code is drawn by the server (GET .../checkin.png), so every client shows the same one.
      const png = await api.GET("/api/v1/bookings/{id}/checkin.png", { params: { path: { id } }, parseAs: "arrayBuffer" });
      if (png.data) setQr(pngDataUrl(png.data));
    } catch (e) {
      setError(message(e));
    }
  }

  useDidShow(() => {
    if (!needLogin()) void load();
  });

  async function act(what: "cancel" | "restore") {
    if (!b || busy) return;
    const refund = refundOf(b, policy);
    if (what === "cancel") {
      const ok = await Taro.showModal({ content: t("cancelAsk", { amount: money(refund.cents), percent: refund.percent }) });
      if (!ok.confirm) return;
    }
    setBusy(true);
    setError("");
    try {
      const r = await api.POST(what === "cancel" ? "/api/v1/bookings/{id}/cancel" : "/api/v1/bookings/{id}/restore", {
        params: { path: { id }, header: { "Idempotency-Key": `${what}-${id}-${b.version}` } },
      });
      if (r.error) throw r.error;
      setNotice(what === "cancel" ? t("cancelled", { amount: money(refund.cents) }) : t("restored"));
      await load();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  }

  const live = b && (b.status === "CONFIRMED" || b.status === "ARRIVED" || b.status === "IN_PROGRESS");
  return (
    <View className="page booking-page">
      {error && <View className="error">{error}</View>}
      {notice && <View className="notice">{notice}</View>}
      {b && (
        <>
          <View className="card">
            <View className="row between">
              <Text className="title">
                {hm(b.start)}–{hm(b.end)}
              </Text>
              <Text className={`status ${b.status}`}>{t(`status_${b.status}` as TextKey)}</Text>
            </View>
            <Text className="muted">
              {ymd(b.start)} · {money(b.amount_cents)}
            </Text>
            {b.status === "CONFIRMED" && <View className="muted">{t("releaseAt", { time: hm(b.release_at) })}</View>}
            {b.status === "PENDING_APPROVAL" && b.approval_deadline && (
              <View className="notice">{t("awaitingApproval", { time: `${ymd(b.approval_deadline)} ${hm(b.approval_deadline)}` })}</View>
            )}
          </View>
          {live && (
            <View className="card" style={{ textAlign: "center" }}>
              <View className="muted">{t("showQR")}</View>
              {qr && <Image className="qr" src={qr} mode="scaleToFill" />}
              <View className="muted">{t("checkinCode")}</View>
              <View className="code">{b.checkin_code}</View>
            </View>
          )}
          {b.status === "RELEASED" && (
            <Button className="btn" disabled={busy} onClick={() => act("restore")}>
              {busy && <Text className="spinner" />}
              {t("restore")}
            </Button>
          )}
          {b.status === "CONFIRMED" && Date.now() < Date.parse(b.start) && (
            <Button className="btn danger" disabled={busy} onClick={() => act("cancel")}>
              {busy && <Text className="spinner" />}
              {t("cancel")} · {money(refundOf(b, policy).cents)}
            </Button>
          )}
          <View className="card">
            <View className="status">{t("history")}</View>
            {history.map((h) => (
              <View key={h.at + h.to} className="history">
                <Text className={`status ${h.to}`}>{t(`status_${h.to}` as TextKey)}</Text>
                <Text className="muted">
                  {" "}
                  {ymd(h.at)} {h.at.slice(11, 19)} · {h.reason}
                </Text>
              </View>
            ))}
          </View>
        </>
      )}
    </View>
  );
}
