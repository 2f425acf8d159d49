// The console's one way to the API (openapi.json is the contract): the operator's token, the
// language of the answers, idempotency keys for mutating POSTs and the parsing of error bodies.

import { lang, t } from './i18n.js';

const BASE = '/api/v1';
const TOKEN_KEY = 'slotwheel.console.token';

/** An answer that is not 2xx, as {"error": {code, message, request_id, field?, details?}} tells it. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || t('error.unexpected', { status }));
    this.status = status;
    this.code = error.code || 'unknown';
    this.field = error.field || '';
    this.details = error.details || {};
    this.requestId = error.request_id || '';
  }

  /** The server has no such route yet (it answers 404 for an unknown path, 405 for a wrong method). */
  get routeMissing() {
    return this.status === 405 || (this.status === 404 && this.code === 'not_found');
  }

  /** A retry with the same Idempotency-Key is safe and needed: the first try's outcome is unknown. */
  get outcomeUnknown() {
    return this.status === 0 || this.status >= 500 || this.status === 429 || this.code === 'request_in_progress';
  }
}

// ---- the session: the token in sessionStorage, its claims read from the JWT payload ----

/** The JWT's payload (sub, role, venue_id, exp), or null when the text is not a JWT. */
export function decodeJwt(token) {
  const parts = String(token).trim().split('.');
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return claims && typeof claims === 'object' ? claims : null;
  } catch {
    return null;
  }
}

export const session = {
  token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  },
  /** The signed-in operator: {sub, role, venueId, exp}, or null when nobody (or an expired token) is. */
  user() {
    const claims = decodeJwt(this.token());
    if (!claims || (claims.exp && claims.exp * 1000 < Date.now())) return null;
    return {
      sub: String(claims.sub || ''),
      role: String(claims.role || ''),
      venueId: claims.venue_id == null ? '' : String(claims.venue_id),
      exp: claims.exp ? new Date(claims.exp * 1000) : null,
    };
  },
  signIn(token) {
    sessionStorage.setItem(TOKEN_KEY, token.trim());
  },
  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

// A 401 anywhere means the token is gone or expired: the shell sends the operator to the login page.
let unauthorized = () => {};
export function onUnauthorized(fn) {
  unauthorized = fn;
}

// ---- idempotency ----

function randomKey() {
  return 'console-' + crypto.randomUUID();
}

/**
 * One user action (a click, a form's submit). Its tries share one Idempotency-Key while the outcome
 * of the last try is unknown (network failure, 5xx, request in progress), so that a retry can never
 * act twice; once an answer is known, or the body changes, the next try is a new action with a new key.
 */
export function newAction() {
  let key = null;
  let sentBody = null;
  return {
    keyFor(body) {
      if (key === null || body !== sentBody) {
        key = randomKey();
        sentBody = body;
      }
      return key;
    },
    settle(err) {
      if (!err || !err.outcomeUnknown) key = null;
    },
  };
}

// ---- the call ----

function url(path, query) {
  const u = new URL(BASE + path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  return u.pathname + u.search;
}

/**
 * Calls the API and answers the parsed JSON body (null for 204). Throws ApiError for anything else,
 * with status 0 when the server could not be reached. A POST sends an Idempotency-Key: the action's
 * (see newAction), or a fresh one.
 */
export async function api(method, path, { query, body, action } = {}) {
  const headers = { 'Accept-Language': lang(), Accept: 'application/json' };
  const token = session.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  const text = body === undefined ? undefined : JSON.stringify(body);
  if (text !== undefined) headers['Content-Type'] = 'application/json';
  const act = method === 'POST' ? action || newAction() : null;
  if (act) headers['Idempotency-Key'] = act.keyFor(text ?? '');

  let res;
  try {
    res = await fetch(url(path, query), { method, headers, body: text });
  } catch {
    const err = new ApiError(0, { code: 'network', message: t('error.network') });
    act?.settle(err);
    throw err;
  }
  const data = res.status === 204 ? null : await res.json().catch(() => undefined);
  if (res.ok && data !== undefined) {
    act?.settle(null);
    return data;
  }
  const err = new ApiError(res.status, (data && data.error) || { code: 'unexpected', message: t('error.unexpected', { status: res.status }) });
  act?.settle(err);
  if (res.status === 401) unauthorized();
  throw err;
}

/** Every item of a paginated collection ({items, next_cursor}), up to maxPages pages. */
export async function listAll(path, query = {}, maxPages = 20) {
  const items = [];
  let cursor = '';
  for (let page = 0; page < maxPages; page++) {
    const data = await api('GET', path, { query: { ...query, limit: 100, cursor } });
    items.push(...(data.items || []));
    cursor = data.next_cursor || '';
    if (!cursor) break;
  }
  return items;
}
