// What the browser tests (app.test.mjs, console.test.mjs) share: a free port for a server of their
// own, the API called as a client would, and the H5 app's dev log-in. Not a test file itself.
import { createServer } from "node:net";

/** A TCP port free on 127.0.0.1 now. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * The API at base() (read at each call: the server's address is known only once it runs): call sends
 * one request and answers its JSON body, throwing on any non-2xx; login is a dev log-in's token.
 */
export function apiClient(base) {
  async function call(method, path, token, body) {
    const res = await fetch(base() + path, {
      method,
      headers: { "Content-Type": "application/json", "Accept-Language": "zh-CN", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
  const login = async (who) => (await call("POST", "/api/v1/auth/dev-login", undefined, who)).token;
  return { call, login };
}

/** Logs page into the H5 app at base as guest name, or as the desk of the venue named staffVenue. */
export async function appLogin(base, page, name, staffVenue) {
  await page.goto(`${base}/app/#/pages/login/index`);
  await page.locator(".login-name input").fill(name);
  if (staffVenue) {
    await page.getByText(staffVenue, { exact: true }).click();
    await page.locator(".staff-login").click();
    await page.waitForFunction(() => location.hash.includes("pages/desk/index"));
  } else {
    await page.locator(".guest-login").click();
    await page.waitForFunction(() => !location.hash.includes("pages/login"));
  }
}
