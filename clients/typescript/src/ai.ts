/**
 * Vercel AI SDK (`ai`): a tool whose approval is the gateway's.
 *
 *     const gateway = new Gateway({ url, token, agent: "billing-agent" });
 *     const tools = { pay: gatewayTool(gateway, "pay", tool({ inputSchema, execute })) };
 *     await generateText({ model, tools, prompt: "Pay invoice 118" });
 *
 * Each call raises a gateway request (its idempotency key is the call's id, within the
 * client's run) with the tool's JSON Schema, so a reviewer may edit the arguments; the
 * wrapped execute waits for the decision (the call's abortSignal ends the wait) and runs the
 * tool with the approved arguments, a reviewer's edit or as the model sent them. A rejection
 * or a deadline is the tool's result: `{ approved: false, reason, decidedBy, message }`.
 */
import { asSchema, type Tool, type ToolExecutionOptions } from "ai";

import type { Gateway, RequestOptions } from "./client.js";
import { rejection, type GatewayRejection } from "./decided.js";

export type { GatewayRejection } from "./decided.js";

export type GatewayToolOptions = Omit<RequestOptions, "key" | "signal" | "schema" | "kind">;

/** `tool`, its calls decided by the gateway's reviewers; `name` is the tool's name there. */
export function gatewayTool<INPUT extends Record<string, unknown>, OUTPUT>(
  gateway: Gateway,
  name: string,
  tool: Tool<INPUT, OUTPUT>,
  options: GatewayToolOptions = {},
): Tool<INPUT, OUTPUT | GatewayRejection> {
  const execute = tool.execute;
  if (!execute) throw new TypeError(`${name} has no execute: nothing to run once approved`);
  return {
    ...tool,
    needsApproval: false, // the gateway's reviewers decide, in the wrapped execute
    execute: async (input: INPUT, call: ToolExecutionOptions) => {
      const schema = (await asSchema(tool.inputSchema).jsonSchema) as Record<string, unknown>;
      const { $schema: _dialect, ...argumentsSchema } = schema;
      const made = await gateway.raiseRequest(name, input, {
        key: `call-${call.toolCallId}`,
        schema: argumentsSchema,
        description: tool.description ?? "",
        prompt: `The agent wants to call ${name}.`,
        signal: call.abortSignal,
        ...options,
      });
      const decided = await gateway.wait(made, { signal: call.abortSignal, within: options.within });
      if (!decided.approved) return rejection(decided);
      const approved = (decided.arguments ?? input) as INPUT;
      // execute may return a value, a promise or a stream of values (AsyncIterable).
      return (await execute(approved, call)) as OUTPUT;
    },
  } as Tool<INPUT, OUTPUT | GatewayRejection>;
}
