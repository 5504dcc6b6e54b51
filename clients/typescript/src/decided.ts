/** What an adapter tells the model when the gateway did not approve a call. */
import type { ExternalRequest } from "./errors.js";

/** A call the gateway did not approve, as the tool's result: the model reads why. */
export interface GatewayRejection {
  approved: false;
  status: ExternalRequest["status"];
  reason: string | null;
  decidedBy: string | null;
  message: string;
}

/** Why the call did not run, in a sentence for the model. */
export function rejectionMessage(decided: ExternalRequest): string {
  if (decided.status === "timed_out")
    return "Nobody approved this call before its deadline; it was not run.";
  const who = decided.decided_by ?? "the gateway";
  return `Rejected by ${who}` + (decided.reason ? `: ${decided.reason}` : ".");
}

export function rejection(decided: ExternalRequest): GatewayRejection {
  return {
    approved: false,
    status: decided.status,
    reason: decided.reason,
    decidedBy: decided.decided_by,
    message: rejectionMessage(decided),
  };
}
