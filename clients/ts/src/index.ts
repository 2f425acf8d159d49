// The typed client of slotwheel's REST API. The types in schema.ts are generated from
// api/openapi.json (npm run generate) and must not be edited by hand; this file sends the requests.
//
// It has its own small transport instead of openapi-fetch because a WeChat mini-program has no
// fetch, Headers or FormData — only wx.request (Taro.request, uni.request) — and openapi-fetch needs
// all three. The same code runs on fetch (browsers, Node >= 18) or on a wx.request-shaped function,
// and never touches those globals on the second path.
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

type Schemas = components["schemas"];

/** The body of every non-2xx answer. */
export type ErrorBody = Schemas["Error"];
/** Every error code the server can answer with. */
export type ErrorCode = ErrorBody["error"]["code"];

export type Venue = Schemas["Venue"];
export type Resource = Schemas["Resource"];
export type Service = Schemas["Service"];
export type ServiceRole = Schemas["ServiceRole"];
export type Slot = Schemas["Slot"];
export type Availability = Schemas["Availability"];
/** A hold's body: one of the two shapes, so a resource hold without end does not compile. */
export type HoldInput = Schemas["HoldInput"];
export type ResourceHoldInput = Schemas["ResourceHoldInput"];
export type ServiceHoldInput = Schemas["ServiceHoldInput"];
export type Hold = Schemas["Hold"];
export type Booking = Schemas["Booking"];
export type BookingStatus = Booking["status"];
export type HistoryEntry = Schemas["HistoryEntry"];
export type RescheduleInput = Schemas["RescheduleInput"];
export type Policy = Schemas["Policy"];
export type WaitlistEntry = Schemas["WaitlistEntry"];
/** The arguments of wx.requestPayment, from POST /api/v1/holds/{id}/wechatpay. */
export type WechatPayParams = Schemas["WechatPayParams"];
export type Refund = Schemas["Refund"];
/** What POST /api/v1/admin/users/{id}/erase did: the pseudonym and the records carrying it, per kind. */
export type Erasure = Schemas["Erasure"];
export type Token = Schemas["Token"];

/** The languages of error messages. */
export type Language = "en" | "zh-CN";

// ---- the request function of mini-programs -------------------------------------------------------

/** What a wx.request-shaped function is given (wx.request, Taro.request, uni.request). */
export interface WxRequestOptions {
  url: string;
  method: "GET" | "POST" | "PUT" | "DELETE";
  header: Record<string, string>;
  data?: string;
  timeout: number;
  /** Anything but "json": the body comes back as text, parsed here, so every runtime answers alike. */
  dataType: string;
  responseType: "text" | "arraybuffer";
  success(result: WxRequestSuccess): void;
  fail(error: WxRequestFail): void;
}

export interface WxRequestSuccess {
  statusCode: number;
  data: unknown;
  header?: Record<string, string>;
}

export interface WxRequestFail {
  errMsg: string;
  errno?: number;
}

/** wx.request, Taro.request or uni.request, or anything that takes the same options. */
export type WxRequest = (options: WxRequestOptions) => unknown;

// ---- failures without an answer ----------------------------------------------------------------

/**
 * TransportError is thrown when no answer came: "timeout" (none within the timeout), "network" (the
 * request could not be sent or the connection broke), or "bad_response" (an answer that is not the
 * JSON the contract promises, e.g. a proxy's HTML error page). An answer with an error body is not
 * thrown: it comes back as { error }.
 */
export class TransportError extends Error {
  override readonly name = "TransportError";
  readonly kind: "timeout" | "network" | "bad_response";
  readonly status: number | undefined;

  constructor(kind: TransportError["kind"], message: string, status?: number) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

export function isTransportError(e: unknown, ...kinds: TransportError["kind"][]): e is TransportError {
  return e instanceof TransportError && (kinds.length === 0 || kinds.includes(e.kind));
}

// ---- types of a call, derived from the generated paths -------------------------------------------

type Method = "get" | "put" | "post" | "delete";
const methods = { get: "GET", put: "PUT", post: "POST", delete: "DELETE" } as const;

/** The paths that have an operation for the method. */
export type PathsWith<M extends Method> = {
  [P in keyof paths]: paths[P] extends { [K in M]: object } ? P : never;
}[keyof paths];

type OperationOf<P extends keyof paths, M extends Method> = paths[P] extends { [K in M]: infer O } ? O : never;

type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];

type ParamsOf<O> = O extends { parameters: infer Q } ? Q : never;
type ParamsInit<O> = [RequiredKeys<ParamsOf<O>>] extends [never] ? { params?: ParamsOf<O> } : { params: ParamsOf<O> };

type BodyInit<O> = O extends { requestBody: { content: { "application/json": infer B } } }
  ? { body: B }
  : O extends { requestBody?: { content: { "application/json": infer B } } }
    ? { body?: B }
    : { body?: never };

type ParseAs = "json" | "arrayBuffer";

interface CommonInit {
  /** Headers besides the token and language, e.g. X-Request-Id. */
  headers?: Record<string, string>;
  /** Milliseconds before the call fails with TransportError "timeout" (default: the client's). */
  timeout?: number;
  /** "arrayBuffer" for binary answers such as GET /api/v1/bookings/{id}/checkin.png. */
  parseAs?: ParseAs;
}

export type Init<O> = ParamsInit<O> & BodyInit<O> & CommonInit;
type InitArg<O> = object extends Init<O> ? [init?: Init<O>] : [init: Init<O>];

type Responses<O> = O extends { responses: infer R } ? R : never;
type OkStatus = 200 | 201 | 202 | 204;
type ContentOf<R> = R extends { content: { "application/json": infer C } }
  ? C
  : R extends { content: { "image/png": unknown } }
    ? ArrayBuffer
    : R extends { content: infer C }
      ? C[keyof C]
      : undefined;
type DataOf<O> = ContentOf<Responses<O>[Extract<keyof Responses<O>, OkStatus>]>;
type ErrorOf<O> = ContentOf<Responses<O>[Exclude<keyof Responses<O>, OkStatus>]>;

interface Answer {
  /** The HTTP status. */
  status: number;
  /** The answer's headers, names in lower case (x-request-id is always there). */
  headers: Record<string, string>;
}

/** Every call answers { data } on 2xx or { error } otherwise; error is the error body. */
export type Result<O> = (Answer & { data: DataOf<O>; error?: undefined }) | (Answer & { data?: undefined; error: ErrorOf<O> });

type Call<M extends Method> = <P extends PathsWith<M>>(
  path: P,
  ...init: InitArg<OperationOf<P, M>>
) => Promise<Result<OperationOf<P, M>>>;

export interface SlotwheelClient {
  GET: Call<"get">;
  POST: Call<"post">;
  PUT: Call<"put">;
  DELETE: Call<"delete">;
}

export interface SlotwheelOptions {
  /** The server's origin, e.g. "http://127.0.0.1:8080"; "" for the page's own origin. Paths carry /api/v1. */
  baseUrl?: string;
  /**
   * The Bearer token (from POST /api/v1/auth/*), or a function asked before each request so that a
   * token obtained or renewed later is used. Browsing needs none.
   */
  token?: string | (() => string | undefined);
  /** Accept-Language of every request: the language of error messages. */
  language?: Language | (() => Language);
  /** A wx.request-shaped function (wx.request, Taro.request, uni.request): used instead of fetch. */
  request?: WxRequest;
  /** The fetch to use when no request function is given (default: the global fetch). */
  fetch?: typeof fetch;
  /** Milliseconds before a call fails with TransportError "timeout" (default 15000). */
  timeout?: number;
}

// ---- the transport ------------------------------------------------------------------------------

interface Wire {
  method: WxRequestOptions["method"];
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  timeout: number;
  parseAs: ParseAs;
}

interface Raw {
  status: number;
  headers: Record<string, string>;
  body: string | ArrayBuffer | object | null | undefined;
}

/**
 * createClient returns a client whose paths, parameters, bodies and answers are typed by the
 * document. With options.request it sends through that wx.request-shaped function; otherwise
 * through fetch.
 */
export function createClient(options: SlotwheelOptions = {}): SlotwheelClient {
  const baseUrl = (options.baseUrl ?? "").replace(/\/+$/, "");
  const send = options.request ? viaRequest(options.request) : viaFetch(options.fetch);
  const defaultTimeout = options.timeout ?? 15000;

  function call(method: Method) {
    return async (path: string, init: Record<string, unknown> = {}) => {
      const params = (init.params ?? {}) as {
        path?: Record<string, unknown>;
        query?: Record<string, unknown>;
        header?: Record<string, unknown>;
      };
      const headers: Record<string, string> = { Accept: "application/json" };
      const bearer = typeof options.token === "function" ? options.token() : options.token;
      if (bearer) {
        headers.Authorization = `Bearer ${bearer}`;
      }
      const language = typeof options.language === "function" ? options.language() : options.language;
      if (language) {
        headers["Accept-Language"] = language;
      }
      for (const [k, v] of Object.entries(params.header ?? {})) {
        if (v !== undefined && v !== null) {
          headers[k] = String(v);
        }
      }
      Object.assign(headers, init.headers ?? {});
      let body: string | undefined;
      if (init.body !== undefined) {
        body = JSON.stringify(init.body);
        headers["Content-Type"] = "application/json";
      }
      const parseAs = (init.parseAs as ParseAs | undefined) ?? "json";
      const raw = await send({
        method: methods[method],
        url: baseUrl + fillPath(path, params.path) + queryString(params.query),
        headers,
        body,
        timeout: (init.timeout as number | undefined) ?? defaultTimeout,
        parseAs,
      });
      return interpret(raw, parseAs);
    };
  }

  return {
    GET: call("get"),
    POST: call("post"),
    PUT: call("put"),
    DELETE: call("delete"),
  } as unknown as SlotwheelClient;
}

function fillPath(path: string, values: Record<string, unknown> | undefined): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = values?.[name];
    if (v === undefined || v === null) {
      throw new TypeError(`slotwheel client: path parameter ${name} of ${path} is missing`);
    }
    return encodeURIComponent(String(v));
  });
}

function queryString(query: Record<string, unknown> | undefined): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(query ?? {})) {
    for (const item of Array.isArray(v) ? v : [v]) {
      if (item !== undefined && item !== null) {
        parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(item))}`);
      }
    }
  }
  return parts.length > 0 ? `?${parts.join("&")}` : "";
}

function interpret(raw: Raw, parseAs: ParseAs): Answer & { data?: unknown; error?: unknown } {
  const ok = raw.status >= 200 && raw.status < 300;
  const answer: Answer = { status: raw.status, headers: raw.headers };
  if (ok && parseAs === "arrayBuffer") {
    if (!(raw.body instanceof ArrayBuffer)) {
      throw new TransportError("bad_response", `status ${raw.status}: expected binary data`, raw.status);
    }
    return { ...answer, data: raw.body };
  }
  let value: unknown = raw.body;
  if (raw.body instanceof ArrayBuffer) {
    value = utf8(raw.body);
  }
  if (typeof value === "string") {
    if (value === "") {
      value = undefined;
    } else {
      try {
        value = JSON.parse(value);
      } catch {
        throw new TransportError("bad_response", `status ${raw.status}: the answer is not JSON`, raw.status);
      }
    }
  }
  if (ok) {
    return { ...answer, data: value };
  }
  if (value === undefined) {
    // Every error answer of slotwheel has a body; none means something in between answered.
    throw new TransportError("bad_response", `status ${raw.status} without a body`, raw.status);
  }
  return { ...answer, error: value };
}

function viaFetch(given: typeof fetch | undefined): (w: Wire) => Promise<Raw> {
  return async (w) => {
    const f = given ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new TypeError("slotwheel client: no fetch here; pass request (wx.request, Taro.request) to createClient");
    }
    const abort = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, w.timeout);
    try {
      const init: RequestInit = { method: w.method, headers: w.headers, signal: abort.signal };
      if (w.body !== undefined) {
        init.body = w.body;
      }
      const res = await f(w.url, init);
      const headers: Record<string, string> = {};
      res.headers.forEach((value, name) => {
        headers[name.toLowerCase()] = value;
      });
      const ok = res.status >= 200 && res.status < 300;
      const body = ok && w.parseAs === "arrayBuffer" ? await res.arrayBuffer() : await res.text();
      return { status: res.status, headers, body };
    } catch (e) {
      if (timedOut) {
        throw new TransportError("timeout", `${w.method} ${w.url}: no answer within ${w.timeout} ms`);
      }
      throw new TransportError("network", `${w.method} ${w.url}: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      clearTimeout(timer);
    }
  };
}

function viaRequest(request: WxRequest): (w: Wire) => Promise<Raw> {
  return (w) =>
    new Promise<Raw>((resolve, reject) => {
      const options: WxRequestOptions = {
        url: w.url,
        method: w.method,
        header: w.headers,
        timeout: w.timeout,
        dataType: "text",
        responseType: w.parseAs === "arrayBuffer" ? "arraybuffer" : "text",
        success(res) {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.header ?? {})) {
            headers[k.toLowerCase()] = String(v);
          }
          resolve({ status: res.statusCode, headers, body: res.data as Raw["body"] });
        },
        fail(err) {
          const message = `${w.method} ${w.url}: ${err?.errMsg ?? "request failed"}`;
          // wx.request says "request:fail timeout"; Taro's H5 request aborts its fetch on timeout,
          // and is given no signal of ours, so an abort there is its timeout too.
          const kind = /time ?out|abort/i.test(err?.errMsg ?? "") ? "timeout" : "network";
          reject(new TransportError(kind, message));
        },
      };
      if (w.body !== undefined) {
        options.data = w.body;
      }
      try {
        request(options);
      } catch (e) {
        reject(new TransportError("network", `${w.method} ${w.url}: ${e instanceof Error ? e.message : String(e)}`));
      }
    });
}

// Mini-programs have no TextDecoder on older base libraries; error bodies of binary requests are
// short, so a plain decoder is enough.
function utf8(buf: ArrayBuffer): string {
  const b = new Uint8Array(buf);
  let out = "";
  for (let i = 0; i < b.length; ) {
    const c = b[i++]!;
    let cp: number;
    if (c < 0x80) {
      cp = c;
    } else if (c < 0xe0) {
      cp = ((c & 0x1f) << 6) | (b[i++]! & 0x3f);
    } else if (c < 0xf0) {
      cp = ((c & 0x0f) << 12) | ((b[i++]! & 0x3f) << 6) | (b[i++]! & 0x3f);
    } else {
      cp = ((c & 0x07) << 18) | ((b[i++]! & 0x3f) << 12) | ((b[i++]! & 0x3f) << 6) | (b[i++]! & 0x3f);
    }
    out += String.fromCodePoint(cp);
  }
  return out;
}

// ---- helpers ------------------------------------------------------------------------------------

/** isError tells whether an answer's error body carries one of the given codes. */
export function isError<C extends ErrorCode>(
  body: unknown,
  ...codes: C[]
): body is ErrorBody & { error: { code: C } } {
  if (typeof body !== "object" || body === null || !("error" in body)) {
    return false;
  }
  const error = (body as { error: unknown }).error;
  if (typeof error !== "object" || error === null || !("code" in error)) {
    return false;
  }
  return (codes as string[]).includes(String((error as { code: unknown }).code));
}

/** The prefix of the check-in QR payload: SWCHK:<checkin_code>. */
export const CHECKIN_QR_PREFIX = "SWCHK:";

/** checkinPayload is what a booking's QR code carries (GET /api/v1/bookings/{id}/checkin.png draws it). */
export function checkinPayload(code: string): string {
  return CHECKIN_QR_PREFIX + code;
}

/**
 * checkinCodeFromScan turns what a scanner read — the QR payload, or a code typed by hand, in any
 * case and with stray spaces — into the code POST /api/v1/checkins takes; "" when there is none.
 */
export function checkinCodeFromScan(text: string): string {
  let s = text.trim();
  if (s.toUpperCase().startsWith(CHECKIN_QR_PREFIX)) {
    s = s.slice(CHECKIN_QR_PREFIX.length);
  }
  return s.replace(/\s+/g, "").toUpperCase();
}
