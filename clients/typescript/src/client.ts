/**
 * The gateway's external requests over HTTP (POST /api/requests, GET /api/requests/{id}?wait=N),
 * as the Python client makes them: a request is raised with an idempotency key chosen before
 * the first attempt, so a retry after a lost answer finds the request it made instead of
 * making another; connection errors and 502-504 are retried with exponential backoff and
 * jitter, a 429 after the Retry-After the gateway sends. Waiting is a loop of long polls,
 * ended early by an AbortSignal.
 */
import {
  errorFor,
  Rejected,
  StillPending,
  TimedOut,
  TooManyRequests,
  type ErrorBody,
  type ExternalRequest,
} from "./errors.js";
import type { components } from "./schema.js";

export type RaiseRequestBody = components["schemas"]["RaiseRequest"];
export type Resume = components["schemas"]["Resume"];
export type Outcome = components["schemas"]["Outcome"];
/** A decided request: `arguments` are what to run the tool with once approved. */
export type Decision = ExternalRequest;
/** The JSON of /.well-known/jwks.json. */
export interface Jwks {
  keys: Array<Record<string, unknown>>;
}

/** What a request says besides its tool and arguments (the RaiseRequest body's fields). */
export type RequestOptions = Partial<
  Omit<RaiseRequestBody, "agent" | "run_id" | "idempotency_key" | "tool" | "arguments">
> & {
  /** The idempotency key: the same one on a retry answers the request it made. */
  key?: string;
  /** Stops raising and waiting: the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Seconds to wait for a decision before StillPending (default: until the gateway decides). */
  within?: number;
};

export interface RetryOptions {
  /** Tries in all (6). */
  attempts?: number;
  /** Seconds before the first retry, doubled each time (0.2). */
  backoff?: number;
  /** The longest wait between tries, in seconds (10); a longer Retry-After is surfaced. */
  maxBackoff?: number;
}

export interface GatewayOptions {
  /** The gateway's base URL, e.g. http://127.0.0.1:8000. */
  url: string;
  /** An API token with the `runs` scope (create_api_token USER --scope runs). */
  token: string;
  /** The asking agent's name. */
  agent: string;
  /** The outside run's id: its requests share one thread (default: a new one per client). */
  runId?: string;
  retry?: RetryOptions;
  /** The fetch to call (default: the global one). */
  fetch?: typeof fetch;
}

/** The longest one long poll waits, in seconds (the gateway answers by then, at most 60). */
export const POLL_SECONDS = 30;
const RETRY_STATUSES = new Set([429, 502, 503, 504]);

export function newKey(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

function aborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    aborted(signal);
    const timer = setTimeout(done, seconds * 1000);
    function done(): void {
      signal?.removeEventListener("abort", stop);
      resolve();
    }
    function stop(): void {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener("abort", stop, { once: true });
  });
}

function retryAfter(response: Response, body: ErrorBody): number | undefined {
  const header = Number.parseFloat(response.headers.get("Retry-After") ?? "");
  if (Number.isFinite(header)) return Math.max(0, header);
  return typeof body.retry_after === "number" ? body.retry_after : undefined;
}

async function decode(response: Response): Promise<unknown> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: "bad_response", detail: text.slice(0, 500), fields: null };
  }
  if (response.status >= 400) {
    const error = body as ErrorBody;
    throw errorFor(response.status, error, retryAfter(response, error));
  }
  return body;
}

/** A request's outcome: the request when approved; Rejected, TimedOut or StillPending else. */
export function outcome(request: ExternalRequest): Decision {
  if (request.status === "pending") throw new StillPending(request);
  if (request.approved) return request;
  if (request.status === "timed_out") throw new TimedOut(request);
  throw new Rejected(request);
}

/** A client for one outside agent (`agent`) and one of its runs (`runId`). */
export class Gateway {
  readonly url: string;
  readonly agent: string;
  readonly runId: string;
  readonly retry: Required<RetryOptions>;
  readonly #token: string;
  readonly #fetch: typeof fetch;

  constructor(options: GatewayOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.agent = options.agent;
    this.runId = options.runId ?? newKey();
    this.retry = { attempts: 6, backoff: 0.2, maxBackoff: 10, ...options.retry };
    this.#token = options.token;
    this.#fetch = options.fetch ?? fetch;
  }

  /** One call, retried on connection errors, 502-504 and 429; the decoded JSON answer. */
  async call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const { attempts, backoff, maxBackoff } = this.retry;
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= attempts - 1;
      let response: Response;
      try {
        response = await this.#fetch(this.url + path, {
          method,
          headers: {
            Authorization: `Bearer ${this.#token}`,
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
        });
      } catch (error) {
        aborted(signal);
        if (last) throw error;
        await sleep(Math.min(maxBackoff, backoff * 2 ** attempt) * (0.5 + Math.random() / 2), signal);
        continue;
      }
      if (!RETRY_STATUSES.has(response.status) || last) return (await decode(response)) as T;
      let wait = Math.min(maxBackoff, backoff * 2 ** attempt) * (0.5 + Math.random() / 2);
      if (response.status === 429) {
        try {
          await decode(response);
        } catch (error) {
          const asked = (error as TooManyRequests).retryAfter;
          // Longer than this client waits between tries: the caller decides, with the figure.
          if (asked !== undefined && asked > maxBackoff) throw error;
          wait = asked ?? wait;
        }
      } else {
        await response.body?.cancel();
      }
      await sleep(wait, signal);
    }
  }

  /** The gateway's public keys, for verifyReceipt. */
  jwks(signal?: AbortSignal): Promise<Jwks> {
    return this.call("GET", "/.well-known/jwks.json", undefined, signal);
  }

  /** Raise a request (once per key, however often it is retried); returns it as the gateway
   * made it, pending unless a policy rule decided it at once. */
  raiseRequest(
    tool: string,
    args: Record<string, unknown> = {},
    options: RequestOptions = {},
  ): Promise<ExternalRequest> {
    const { key, signal, within: _within, ...fields } = options;
    const body: Partial<RaiseRequestBody> = {
      agent: this.agent,
      run_id: this.runId,
      tool,
      arguments: args,
      idempotency_key: key ?? newKey(),
      ...fields,
    };
    return this.call("POST", "/api/requests", body, signal);
  }

  /** The request now, or once decided within `wait` seconds (a long poll). */
  get(id: string, wait = 0, signal?: AbortSignal): Promise<ExternalRequest> {
    const query = wait ? `?wait=${wait}` : "";
    return this.call("GET", `/api/requests/${encodeURIComponent(id)}${query}`, undefined, signal);
  }

  /** Long polls until the request is decided; StillPending after `within` seconds. */
  async wait(
    request: ExternalRequest | string,
    options: { within?: number; signal?: AbortSignal } = {},
  ): Promise<ExternalRequest> {
    const id = typeof request === "string" ? request : request.id;
    const end = options.within === undefined ? undefined : Date.now() + options.within * 1000;
    for (;;) {
      const left = end === undefined ? POLL_SECONDS : Math.min(POLL_SECONDS, (end - Date.now()) / 1000);
      const found = await this.get(id, Math.max(1, Math.floor(left)), options.signal);
      if (found.status !== "pending") return found;
      if (end !== undefined && Date.now() >= end) throw new StillPending(found);
    }
  }

  /** Raise and wait: the approved request (`arguments`: what to run the tool with, a
   * reviewer's edit or as sent); throws Rejected or TimedOut. */
  async requestApproval(
    tool: string,
    args: Record<string, unknown>,
    options: RequestOptions = {},
  ): Promise<Decision> {
    const made = await this.raiseRequest(tool, args, options);
    return outcome(await this.wait(made, options));
  }

  /** Ask the reviewers a question and wait for the answer. */
  async ask(question: string, options: RequestOptions = {}): Promise<string> {
    const made = await this.raiseRequest(
      "ask_human",
      { question },
      { prompt: question, kind: "input", ...options },
    );
    return outcome(await this.wait(made, options)).response ?? "";
  }

  /** A reviewer's decision (resumeExecution; a token with the `decide` scope): 202 taken,
   * 200 the same again; throws Forbidden (the policy's `rule`), Conflict (`decidedBy`). */
  decide(
    request: Pick<ExternalRequest, "id" | "thread">,
    decision: Partial<Resume>,
    signal?: AbortSignal,
  ): Promise<Outcome> {
    const path = `/api/threads/${request.thread}/suspensions/${request.id}/resume`;
    return this.call("POST", path, decision, signal);
  }
}

