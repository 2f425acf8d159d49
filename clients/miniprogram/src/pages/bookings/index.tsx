// My bookings, newest first, with their status.
import { Text, View } from "@tarojs/components";
import Taro, { useDidShow } from "@tarojs/taro";
import { useState } from "react";

import type { Booking, Resource } from "@slotwheel/client";

import { api, cached, hm, message, money, needLogin, ymd } from "../../lib/api";
import { t, type TextKey } from "../../lib/i18n";
import "./index.css";

export default function Bookings() {
  const [items, setItems] = useState<Booking[]>();
  const [names, setNames] = useState<Record<string, string>>({});
  const [error, setError] = useState("");

  useDidShow(() => {
    if (needLogin()) return;
    void (async () => {
      try {
        const [r, resources] = await Promise.all([
          api.GET("/api/v1/bookings"),
          cached("resources", async () => {
            const x = await api.GET("/api/v1/resources");
            if (x.error) throw x.error;
            return x.data.items as Resource[];
          }),
        ]);
        if (r.error) throw r.error;
        setItems(r.data.items);
        setNames(Object.fromEntries(resources.map((x) => [x.resource_id, x.name])));
      } catch (e) {
        setError(message(e));
      }
    })();
  });

  return (
    <View className="page">
      <View className="bar">
        <Text className="title">{t("myBookings")}</Text>
      </View>
      {error && <View className="error">{error}</View>}
      {items?.length === 0 && <Text className="muted">{t("noBookings")}</Text>}
      {items?.map((b) => (
        <View key={b.booking_id} className="card booking" onClick={() => Taro.navigateTo({ url: `/pages/booking/index?id=${b.booking_id}` })}>
          <View className="row between">
            <Text>{names[b.resource_id] ?? b.resource_id}</Text>
            <Text className={`status ${b.status}`}>{t(`status_${b.status}` as TextKey)}</Text>
          </View>
          <Text className="muted">
            {ymd(b.start)} {hm(b.start)}–{hm(b.end)} · {money(b.amount_cents)}
          </Text>
        </View>
      ))}
    </View>
  );
}
