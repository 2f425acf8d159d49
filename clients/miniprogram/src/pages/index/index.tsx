// Venues and their resources, filtered by venue and kind. Browsing needs no log-in.
import { Button, Text, View } from "@tarojs/components";
import Taro, { useDidShow } from "@tarojs/taro";
import { useMemo, useState } from "react";

import type { Resource, Venue } from "@slotwheel/client";

import { allVenues, api, cached, message, money, session, setSession } from "../../lib/api";
import { lang, setLang, t } from "../../lib/i18n";
import "./index.css";

export default function Index() {
  const [venues, setVenues] = useState<Venue[]>([]);
  const [resources, setResources] = useState<Resource[]>([]);
  const [venue, setVenue] = useState("");
  const [kind, setKind] = useState("");
  const [error, setError] = useState("");
  const [, rerender] = useState(0);

  useDidShow(() => {
    rerender((n) => n + 1); // log-in state or language may have changed elsewhere
    Promise.all([
      allVenues(),
      cached("resources", async () => {
        const r = await api.GET("/api/v1/resources");
        if (r.error) throw r.error;
        return r.data.items;
      }),
    ])
      .then(([v, r]) => {
        setVenues(v);
        setResources(r);
        setError("");
      })
      .catch((e: unknown) => setError(message(e)));
  });

  const kinds = useMemo(() => [...new Set(resources.map((r) => r.kind))].sort(), [resources]);
  const shown = resources.filter((r) => (!venue || r.venue_id === venue) && (!kind || r.kind === kind));
  const s = session();

  return (
    <View className="page">
      <View className="bar">
        <Text className="title">{t("appTitle")}</Text>
        <Text
          className="link"
          onClick={() => {
            setLang(lang() === "en" ? "zh-CN" : "en");
            rerender((n) => n + 1);
          }}
        >
          {t("language")}
        </Text>
      </View>
      <View className="row" style={{ marginBottom: "16px" }}>
        {s ? (
          <>
            <Text className="muted">
              {t("loggedInAs")}
              {s.user_id}
            </Text>
            <Text className="link" onClick={() => Taro.navigateTo({ url: "/pages/bookings/index" })}>
              {t("myBookings")}
            </Text>
            {(s.role === "staff" || s.role === "admin") && (
              <Text className="link" onClick={() => Taro.navigateTo({ url: "/pages/desk/index" })}>
                {t("desk")}
              </Text>
            )}
            <Text
              className="link"
              onClick={() => {
                setSession(undefined);
                rerender((n) => n + 1);
              }}
            >
              {t("logout")}
            </Text>
          </>
        ) : (
          <Text className="link" onClick={() => Taro.navigateTo({ url: "/pages/login/index" })}>
            {t("login")}
          </Text>
        )}
      </View>
      {error && <View className="error">{error}</View>}
      <View className="row" style={{ marginBottom: "12px" }}>
        <Text className={`chip ${venue === "" ? "on" : ""}`} onClick={() => setVenue("")}>
          {t("allVenues")}
        </Text>
        {venues.map((v) => (
          <Text key={v.venue_id} className={`chip ${venue === v.venue_id ? "on" : ""}`} onClick={() => setVenue(v.venue_id)}>
            {v.name}
          </Text>
        ))}
      </View>
      <View className="row" style={{ marginBottom: "20px" }}>
        <Text className={`chip ${kind === "" ? "on" : ""}`} onClick={() => setKind("")}>
          {t("allKinds")}
        </Text>
        {kinds.map((k) => (
          <Text key={k} className={`chip ${kind === k ? "on" : ""}`} onClick={() => setKind(k)}>
            {k}
          </Text>
        ))}
      </View>
      {shown.map((r) => (
        <View
          key={r.resource_id}
          className="card resource"
          onClick={() => Taro.navigateTo({ url: `/pages/resource/index?id=${r.resource_id}` })}
        >
          <View className="row between">
            <Text className="status">{r.name}</Text>
            <Text>
              {money(r.price_cents)} <Text className="muted">{t("perSlot")}</Text>
            </Text>
          </View>
          <Text className="muted">
            {venues.find((v) => v.venue_id === r.venue_id)?.name} · {r.kind} · {t("capacity")} {r.capacity} · {r.slot_minutes} min
          </Text>
        </View>
      ))}
      {!s && (
        <Button className="btn ghost" onClick={() => Taro.navigateTo({ url: "/pages/login/index" })}>
          {t("login")}
        </Button>
      )}
    </View>
  );
}
