/**
 * OpenAI Agents SDK for JavaScript (`@openai/agents`): tool approvals decided by the gateway.
 *
 *     const approvals = new GatewayApprovals(gateway);
 *     const pay = approvals.gate(tool({ name: "pay", parameters, execute }));
 *     const agent = new Agent({ name: "billing", tools: [pay], model });
 *     const result = await approvals.run(agent, "Pay invoice 118");
 *
 * `gate` sets the tool's `needsApproval` to a function that raises the gateway request for
 * the call (its idempotency key is the call's id, within the client's run) and answers
 * whether a person must decide: no when the gateway's policy approved it at once, yes
 * otherwise. The run then stops with the call among `result.interruptions`. `apply(result)`
 * finds each interrupted call's request (the same key), waits for its decision and answers
 * the interruption on the RunState: `approve`, or `reject` with a message saying who
 * rejected it and why (or that nobody answered before the deadline). `run` repeats
 * run → apply → run until no approval is left.
 *
 * Edited arguments: the SDK runs an approved call with the arguments the model sent, so an
 * approval with edited arguments is answered as a rejection whose message gives the model
 * the approved arguments and asks it to call the tool again with exactly those; that call
 * needs no second approval (`needsApproval` answers no for arguments a reviewer approved,
 * once). The Python client's adapter does the same.
 */
import {
  run,
  type Agent,
  type FunctionTool,
  type RunContext,
  type RunResult,
  type RunState,
  type RunToolApprovalItem,
} from "@openai/agents";

import type { Gateway, RequestOptions } from "./client.js";
import { rejectionMessage } from "./decided.js";
import type { ExternalRequest } from "./errors.js";
import { canonicalJson } from "./receipts.js";

export type GatewayApprovalsOptions = Omit<RequestOptions, "key" | "signal" | "schema" | "kind">;

// The run's context, whatever the caller's agent holds: this class only passes it along.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyContext = any;
type AnyAgent = Agent<AnyContext, AnyContext>;

/** Approvals for one run of an SDK agent, through one Gateway (its run id). */
export class GatewayApprovals {
  readonly gateway: Gateway;
  readonly options: GatewayApprovalsOptions;
  readonly #schemas = new Map<string, Record<string, unknown>>();
  readonly #descriptions = new Map<string, string>();
  // (tool, canonical arguments) a reviewer approved as an edit, not yet called again.
  readonly #edits = new Set<string>();

  constructor(gateway: Gateway, options: GatewayApprovalsOptions = {}) {
    this.gateway = gateway;
    this.options = options;
  }

  /** `tool`, its calls decided by the gateway's reviewers. */
  gate<T extends FunctionTool<AnyContext, AnyContext, AnyContext>>(tool: T, prompt?: string): T {
    const name = tool.name;
    this.#schemas.set(name, tool.parameters as unknown as Record<string, unknown>);
    this.#descriptions.set(name, tool.description);
    tool.needsApproval = async (_context: RunContext, input: unknown, callId?: string) => {
      const args = (typeof input === "string" ? JSON.parse(input || "{}") : input) as Record<
        string,
        unknown
      >;
      if (!callId) throw new TypeError(`${name}: the SDK gave needsApproval no call id`);
      const edit = `${name} ${canonicalJson(args)}`;
      if (this.#edits.delete(edit)) return false; // exactly what a reviewer approved: once
      const made = await this.request(name, args, callId, prompt);
      return !(made.status === "approved" && made.approved);
    };
    return tool;
  }

  /** The gateway request of one call (made once per call id). */
  request(
    tool: string,
    args: Record<string, unknown>,
    callId: string,
    prompt?: string,
  ): Promise<ExternalRequest> {
    return this.gateway.raiseRequest(tool, args, {
      key: `call-${callId}`,
      schema: this.#schemas.get(tool) ?? null,
      description: this.#descriptions.get(tool) ?? "",
      prompt: prompt ?? `The agent wants to call ${tool}.`,
      ...this.options,
    });
  }

  /** Wait for the gateway's decision on each interruption of `result` and answer it on the
   * RunState, which is returned for run() to go on with. */
  async apply<A extends AnyAgent>(
    result: RunResult<AnyContext, A>,
    signal?: AbortSignal,
  ): Promise<RunState<AnyContext, A>> {
    const state = result.state;
    for (const item of result.interruptions as RunToolApprovalItem[]) {
      const name = item.name ?? "";
      const args = JSON.parse(item.arguments || "{}") as Record<string, unknown>;
      const callId = "callId" in item.rawItem ? String(item.rawItem.callId) : "";
      const made = await this.request(name, args, callId);
      const decided = await this.gateway.wait(made, { signal, within: this.options.within });
      if (!decided.approved) {
        state.reject(item, { message: rejectionMessage(decided) });
        continue;
      }
      const approved = decided.arguments ?? args;
      if (canonicalJson(approved) === canonicalJson(args)) {
        state.approve(item);
        continue;
      }
      this.#edits.add(`${name} ${canonicalJson(approved)}`);
      state.reject(item, {
        message:
          `A reviewer (${decided.decided_by}) approved this call with other arguments: ` +
          `${JSON.stringify(approved)}. Call ${name} again with exactly these arguments.`,
      });
    }
    return state;
  }

  /** run() until the run needs no more approvals. */
  async run<A extends AnyAgent>(
    agent: A,
    input: string,
    options: { signal?: AbortSignal; maxTurns?: number } = {},
  ): Promise<RunResult<AnyContext, A>> {
    let result = await run(agent, input, options);
    while (result.interruptions.length) {
      const state = await this.apply(result, options.signal);
      result = await run(agent, state, options);
    }
    return result;
  }
}
