// Log-in. On WeChat: wx.login's code goes to POST /api/v1/auth/wechat (code2Session on the server).
// In the H5 demo: the dev log-in of a server in embedded mode, as a guest or as a venue's desk.
import { Button, Input, Text, View } from "@tarojs/components";
import Taro, { useRouter } from "@tarojs/taro";
import { useEffect, useState } from "react";

import type { Venue } from "@slotwheel/client";

import { api, message, setSession, type Session } from "../../lib/api";
import { t } from "../../lib/i18n";
import "./index.css";

export default function Login() {
  const { params } = useRouter();
  const [name, setName] = useState("guest");
  const [venues, setVenues] = useState<Venue[]>([]);
  const [venue, setVenue] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");

  useEffect(() => {
    void api.GET("/api/v1/venues").then((r) => {
      setVenues(r.data?.items ?? []);
      setVenue(r.data?.items[0]?.venue_id ?? "");
    });
  }, []);

  async function done(s: Session) {
    setSession(s);
    const back = params.back ? decodeURIComponent(params.back) : "";
    if (back) await Taro.redirectTo({ url: back });
    else if (s.role === "staff") await Taro.redirectTo({ url: "/pages/desk/index" });
    else if (Taro.getCurrentPages().length > 1) await Taro.navigateBack();
    else await Taro.redirectTo({ url: "/pages/index/index" }); // opened by a link: nothing to go back to
  }

  async function wechat() {
    setBusy(true);
    setError("");
    try {
      const { code } = await Taro.login();
      const r = await api.POST("/api/v1/auth/wechat", { body: { code } });
      if (r.error) throw r.error;
      await done({ token: r.data.token, user_id: "wechat", role: "user" });
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  }

  async function dev(role: "user" | "staff") {
    setBusy(true);
    setError("");
    try {
      const who = role === "staff" ? { user_id: name, role, venue_id: venue } : { user_id: name, role };
      const r = await api.POST("/api/v1/auth/dev-login", { body: who });
      if (r.error) throw r.error;
      await done({ token: r.data.token, user_id: name, role, ...(role === "staff" ? { venue_id: venue } : {}) });
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(false);
    }
  }

  return (
    <View className="page">
      <View className="bar">
        <Text className="title">{t("login")}</Text>
      </View>
      {error && <View className="error">{error}</View>}
      {process.env.TARO_ENV === "weapp" ? (
        <Button className="btn" disabled={busy} onClick={wechat}>
          {busy && <Text className="spinner" />}
          {t("wechatLogin")}
        </Button>
      ) : (
        <View className="card">
          <Text className="muted">{t("userId")}</Text>
          <Input className="input login-name" value={name} onInput={(e) => setName(e.detail.value)} />
          <Button className="btn guest-login" disabled={busy || !name} onClick={() => dev("user")}>
            {t("guestLogin")}
          </Button>
          <View className="row" style={{ marginTop: "24px" }}>
            {venues.map((v) => (
              <Text key={v.venue_id} className={`chip ${venue === v.venue_id ? "on" : ""}`} onClick={() => setVenue(v.venue_id)}>
                {v.name}
              </Text>
            ))}
          </View>
          <Button className="btn ghost staff-login" disabled={busy || !name || !venue} onClick={() => dev("staff")}>
            {t("staffLogin")}
          </Button>
        </View>
      )}
    </View>
  );
}
