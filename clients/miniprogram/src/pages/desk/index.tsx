// The front desk: scan a guest's QR code (wx.scanCode on WeChat; the camera where the browser can
// read QR codes, or a typed code, in H5) to check the booking in, and the day's list of the venue.
import { Button, Input, Text, View } from "@tarojs/components";
import Taro, { useDidShow } from "@tarojs/taro";
import { useState } from "react";

import { checkinCodeFromScan, type Booking, type Resource } from "@slotwheel/client";

import { allVenues, api, cached, dayIn, hm, message, needLogin, session } from "../../lib/api";
import { t, type TextKey } from "../../lib/i18n";
import "./index.css";

/** H5 only: read one QR code from the camera with the browser's BarcodeDetector, if it has one. */
async function scanInBrowser(): Promise<string | undefined> {
  const w = window as unknown as { BarcodeDetector?: new (o: { formats: string[] }) => { detect(v: unknown): Promise<{ rawValue: string }[]> } };
  if (!w.BarcodeDetector || !navigator.mediaDevices?.getUserMedia) return undefined;
  const stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" } });
  const video = document.createElement("video");
  video.setAttribute("playsinline", "");
  video.style.cssText = "position:fixed;inset:0;width:100%;height:100%;object-fit:cover;z-index:999;background:#000";
  document.body.appendChild(video);
  video.srcObject = stream;
  await video.play();
  const detector = new w.BarcodeDetector({ formats: ["qr_code"] });
  try {
    for (let i = 0; i < 300; i++) {
      const found = await detector.detect(video);
      if (found[0]) return found[0].rawValue;
      await new Promise((r) => requestAnimationFrame(r));
    }
    return undefined;
  } finally {
    stream.getTracks().forEach((tr) => tr.stop());
    video.remove();
  }
}

export default function Desk() {
  const [code, setCode] = useState("");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ booking: Booking; repeat: boolean }>();
  const [error, setError] = useState("");
  const [list, setList] = useState<Booking[]>([]);
  const [names, setNames] = useState<Record<string, string>>({});
  const [seen] = useState(() => new Set<string>());
  const [day, setDay] = useState("");

  async function loadList() {
    // The venue's today, wherever the desk's device thinks it is.
    const venueId = session()?.venue_id;
    const today = dayIn((await allVenues()).find((v) => v.venue_id === venueId)?.timezone);
    setDay(today);
    const [r, resources] = await Promise.all([
      api.GET("/api/v1/admin/bookings", { params: { query: { date: today, ...(venueId ? { venue_id: venueId } : {}) } } }),
      cached("resources", async () => {
        const x = await api.GET("/api/v1/resources");
        if (x.error) throw x.error;
        return x.data.items as Resource[];
      }),
    ]);
    if (r.error) throw r.error;
    setList([...r.data.items].sort((a, b) => a.start.localeCompare(b.start)));
    setNames(Object.fromEntries(resources.map((x) => [x.resource_id, x.name])));
  }

  useDidShow(() => {
    if (!needLogin()) loadList().catch((e: unknown) => setError(message(e)));
  });

  async function checkIn(scanned: string) {
    const c = checkinCodeFromScan(scanned);
    if (!c || busy) return;
    setBusy(true);
    setError("");
    setResult(undefined);
    const sent = Date.now();
    try {
      const r = await api.POST("/api/v1/checkins", { body: { checkin_code: c } });
      if (r.error) throw r.error;
      // A second scan answers the booking as the first left it: say so instead of cheering again.
      // (Seen here, or checked in well before: another desk's scan, whatever the clocks say.)
      const repeat = seen.has(r.data.booking_id) || (!!r.data.checked_in_at && Date.parse(r.data.checked_in_at) < sent - 60_000);
      seen.add(r.data.booking_id);
      setResult({ booking: r.data, repeat });
      setCode("");
      await loadList();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  }

  async function scan() {
    setError("");
    try {
      if (process.env.TARO_ENV === "weapp") {
        const r = await Taro.scanCode({ onlyFromCamera: true, scanType: ["qrCode"] });
        await checkIn(r.result);
      } else {
        const text = await scanInBrowser();
        if (text === undefined) setError(t("noCamera"));
        else await checkIn(text);
      }
    } catch (e) {
      setError(message(e));
    }
  }

  return (
    <View className="page">
      <View className="bar">
        <Text className="title">{t("desk")}</Text>
      </View>
      <View className="card">
        <Text className="muted">{t("scanHint")}</Text>
        <Button className="btn" disabled={busy} onClick={scan}>
          {t("scan")}
        </Button>
        <Input
          className="input code-input"
          value={code}
          placeholder={t("codePlaceholder")}
          onInput={(e) => setCode(e.detail.value)}
          onConfirm={() => checkIn(code)}
        />
        <Button className="btn ghost checkin" disabled={busy || !code.trim()} onClick={() => checkIn(code)}>
          {busy && <Text className="spinner" />}
          {t("checkIn")}
        </Button>
      </View>
      {error && <View className="error">{error}</View>}
      {result && (
        <View className="notice result">
          {result.repeat ? t("alreadyIn") : t("checkedIn")} · {names[result.booking.resource_id] ?? ""} {hm(result.booking.start)}–
          {hm(result.booking.end)} · {result.booking.checkin_code}
        </View>
      )}
      <View className="card">
        <View className="status">
          {t("todaysList")} · {day}
        </View>
        {list.map((b) => (
          <View key={b.booking_id} className="row between desk-row" style={{ padding: "12px 0", borderBottom: "1px solid #eee" }}>
            <Text>
              {hm(b.start)}–{hm(b.end)} {names[b.resource_id] ?? ""}
            </Text>
            <Text className="muted">{b.user_id}</Text>
            <Text className={`status ${b.status}`}>{t(`status_${b.status}` as TextKey)}</Text>
          </View>
        ))}
      </View>
    </View>
  );
}
