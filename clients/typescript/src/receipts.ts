/**
 * Checking a decision's signed receipt with the gateway's public keys alone.
 *
 * A receipt is a compact JWS signed with EdDSA (Ed25519) by the gateway; its header names the
 * key (`kid`) among those published at /.well-known/jwks.json. The signature says the gateway
 * decided so; the claims say what was decided: the request (`suspension`), its outcome, and
 * `args_hash`, the SHA-256 of the canonical JSON of the arguments approved (agents/hashing.py:
 * keys sorted, no spaces, non-ASCII kept, as Python's json.dumps(sort_keys=True,
 * separators=(",", ":"), ensure_ascii=False) writes it).
 */
import { compactVerify, createLocalJWKSet, errors, type JSONWebKeySet } from "jose";

import type { Decision, Jwks } from "./client.js";
import { ReceiptInvalid } from "./errors.js";

export interface ReceiptClaims {
  v: number;
  suspension: string;
  thread: string;
  tool: string;
  agent: string;
  args_hash: string;
  edited: boolean;
  decision: { status: string; approved: boolean | null; reason: string; response_hash: string | null };
  decider: Record<string, unknown>;
  decided_at: string | null;
  [claim: string]: unknown;
}

function byCodePoint(a: string, b: string): number {
  // Python sorts keys by code point; JavaScript's default sort, by UTF-16 unit.
  const x = [...a].map((c) => c.codePointAt(0) ?? 0);
  const y = [...b].map((c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/** The gateway's canonical JSON of a value: keys sorted, no spaces, non-ASCII kept. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => byCodePoint(a, b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** SHA-256 (hex) of the canonical JSON of `value`: a receipt's `args_hash`. */
export async function canonicalHash(value: unknown): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson(value)));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The claims of a receipt when a key of `jwks` signed it; throws ReceiptInvalid otherwise. */
export async function verifyReceiptToken(token: string, jwks: Jwks): Promise<ReceiptClaims> {
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(token, createLocalJWKSet(jwks as JSONWebKeySet), {
      algorithms: ["EdDSA", "Ed25519"],
    }));
  } catch (error) {
    if (error instanceof errors.JWSSignatureVerificationFailed)
      throw new ReceiptInvalid("the signature does not match", { cause: error });
    if (error instanceof errors.JWKSNoMatchingKey)
      throw new ReceiptInvalid("no published key signed it", { cause: error });
    throw new ReceiptInvalid(`not a receipt: ${(error as Error).message}`, { cause: error });
  }
  return JSON.parse(new TextDecoder().decode(payload)) as ReceiptClaims;
}

/**
 * Check a decision's receipt before acting on it: signed by one of the gateway's keys
 * (`jwks`, the JSON of /.well-known/jwks.json), about this request, with this outcome and,
 * once approved, these arguments. Returns its claims (who decided: `claims.decider`);
 * throws ReceiptInvalid otherwise.
 */
export async function verifyReceipt(decision: Decision, jwks: Jwks): Promise<ReceiptClaims> {
  if (!decision.receipt)
    throw new ReceiptInvalid(`request ${decision.id} has no receipt (${decision.status})`);
  const claims = await verifyReceiptToken(decision.receipt, jwks);
  if (claims.suspension !== decision.id)
    throw new ReceiptInvalid(`the receipt is about ${claims.suspension}`);
  if (claims.decision?.status !== decision.status || claims.decision?.approved !== decision.approved)
    throw new ReceiptInvalid(
      `the receipt says ${claims.decision?.status}, the answer says ${decision.status}`,
    );
  if (decision.arguments != null && claims.args_hash !== (await canonicalHash(decision.arguments)))
    throw new ReceiptInvalid("the arguments are not the ones the receipt approved");
  return claims;
}
