// The typed client of slotwheel's REST API. The types in schema.ts are generated from
// api/openapi.json (npm run generate) and must not be edited by hand; this file binds openapi-fetch to
// them and adds the two things every caller of slotwheel sends: a Bearer token and a language.
import createFetchClient, { type Client, type ClientOptions, type Middleware } from "openapi-fetch";

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
export type HoldInput = Schemas["HoldInput"];
export type Hold = Schemas["Hold"];
export type Booking = Schemas["Booking"];
export type BookingStatus = Booking["status"];
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

export interface SlotwheelOptions extends ClientOptions {
  /**
   * The Bearer token (from POST /api/v1/auth/*), or a function asked before each request so that a
   * token obtained or renewed later is used. Browsing needs none.
   */
  token?: string | (() => string | undefined);
  /** Accept-Language of every request: the language of error messages. */
  language?: Language;
}

export type SlotwheelClient = Client<paths, "application/json">;

/**
 * createClient returns a client whose paths, parameters, bodies and answers are typed by the
 * document. baseUrl is the server's origin, e.g. "http://127.0.0.1:8080" for a server in embedded
 * mode; the paths carry /api/v1 themselves.
 */
export function createClient(options: SlotwheelOptions = {}): SlotwheelClient {
  const { token, language, ...fetchOptions } = options;
  const client = createFetchClient<paths, "application/json">(fetchOptions);
  if (token !== undefined || language !== undefined) {
    client.use(defaults(token, language));
  }
  return client;
}

function defaults(token: SlotwheelOptions["token"], language: Language | undefined): Middleware {
  return {
    onRequest({ request }) {
      const bearer = typeof token === "function" ? token() : token;
      if (bearer && !request.headers.has("Authorization")) {
        request.headers.set("Authorization", `Bearer ${bearer}`);
      }
      if (language && !request.headers.has("Accept-Language")) {
        request.headers.set("Accept-Language", language);
      }
      return request;
    },
  };
}

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
