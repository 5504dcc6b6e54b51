/**
 * The gateway's refusals and a request's outcomes as typed errors, in the gateway's own
 * words: `code` and `detail` are its JSON error body's `error` and `detail`.
 */
import type { components } from "./schema.js";

export type ErrorBody = components["schemas"]["Error"];
export type ExternalRequest = components["schemas"]["ExternalRequest"];
export type RecordedDecision = components["schemas"]["Decision"];

/** The gateway refused the call (a 4xx, or a 5xx after the retries). */
export class GatewayError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  readonly code: string;
  readonly detail: string;
  /** The fields that were wrong, by name, for a 400. */
  readonly fields: Record<string, string>;

  constructor(status: number, body: ErrorBody) {
    super(`${status} ${body.error}: ${body.detail}`);
    this.name = new.target.name;
    this.status = status;
    this.body = body;
    this.code = String(body.error ?? "error");
    this.detail = String(body.detail ?? "");
    this.fields = body.fields ?? {};
  }
}

/** 403: the token lacks a scope (`scope`), or the policy refused it (`rule`, e.g. four eyes). */
export class Forbidden extends GatewayError {
  /** The policy's rule that refused the decision (`forbidden_by_policy`), if that was it. */
  readonly rule: string | undefined;
  /** The scopes the call needs (`insufficient_scope`), if that was it. */
  readonly scope: unknown;

  constructor(status: number, body: ErrorBody) {
    super(status, body);
    this.rule = typeof body.rule === "string" ? body.rule : undefined;
    this.scope = body.scope;
  }
}

/** 409: decided already (`decidedBy`, `outcome`: what was recorded), or a key reused. */
export class Conflict extends GatewayError {
  /** The recorded decision, when another one was taken first. */
  readonly outcome: RecordedDecision | undefined;
  readonly decidedBy: string | undefined;

  constructor(status: number, body: ErrorBody) {
    super(status, body);
    const outcome = body.outcome as RecordedDecision | null | undefined;
    this.outcome = outcome ?? undefined;
    this.decidedBy = outcome?.decided_by ?? undefined;
  }
}

/** 429, after the retries, or when Retry-After asks for more than the client waits. */
export class TooManyRequests extends GatewayError {
  /** Seconds the gateway asked to wait (its Retry-After), when it said. */
  readonly retryAfter: number | undefined;

  constructor(status: number, body: ErrorBody, retryAfter: number | undefined) {
    super(status, body);
    this.retryAfter = retryAfter;
  }
}

/** The gateway's error for `status`: Forbidden, Conflict, TooManyRequests or GatewayError. */
export function errorFor(status: number, body: ErrorBody, retryAfter?: number): GatewayError {
  if (status === 403) return new Forbidden(status, body);
  if (status === 409) return new Conflict(status, body);
  if (status === 429) return new TooManyRequests(status, body, retryAfter);
  return new GatewayError(status, body);
}

/** A reviewer rejected the request (or its run was cancelled). */
export class Rejected extends Error {
  readonly request: ExternalRequest;
  readonly reason: string | null;
  readonly decidedBy: string | null;

  constructor(request: ExternalRequest) {
    const who = request.decided_by ? ` by ${request.decided_by}` : "";
    const why = request.reason ? `: ${request.reason}` : "";
    super(`${request.tool} was ${request.status}${who}${why}`);
    this.name = new.target.name;
    this.request = request;
    this.reason = request.reason;
    this.decidedBy = request.decided_by;
  }
}

/** Nobody decided before the gateway's deadline, and its default action was to reject. */
export class TimedOut extends Rejected {}

/** The request was not decided within the time the caller would wait (`within`). */
export class StillPending extends Error {
  readonly request: ExternalRequest;

  constructor(request: ExternalRequest) {
    super(`${request.tool}: no decision yet (request ${request.id})`);
    this.name = new.target.name;
    this.request = request;
  }
}

/** A receipt that does not verify, or does not say what the decision says. */
export class ReceiptInvalid extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}
