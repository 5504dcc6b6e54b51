/** Client for the approval gateway's external requests: ask people before an agent acts. */
export {
  Gateway,
  newKey,
  outcome,
  POLL_SECONDS,
  type Decision,
  type GatewayOptions,
  type Jwks,
  type Outcome,
  type RaiseRequestBody,
  type RequestOptions,
  type Resume,
  type RetryOptions,
} from "./client.js";
export {
  Conflict,
  Forbidden,
  GatewayError,
  ReceiptInvalid,
  Rejected,
  StillPending,
  TimedOut,
  TooManyRequests,
  type ErrorBody,
  type ExternalRequest,
  type RecordedDecision,
} from "./errors.js";
export {
  canonicalHash,
  canonicalJson,
  verifyReceipt,
  verifyReceiptToken,
  type ReceiptClaims,
} from "./receipts.js";
export type { components, paths } from "./schema.js";
