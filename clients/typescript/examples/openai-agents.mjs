// The OpenAI Agents SDK for JavaScript with the gateway's approval: a scripted model (the
// SDK's Model interface, answering turns written below, no network) calls `pay`, whose
// needsApproval asks the gateway; the run stops with an interruption, the gateway's decision
// answers it on the RunState (approve, or reject with the reason), and the run goes on.
//
//   GATEWAY_URL=http://127.0.0.1:8000 GATEWAY_TOKEN=gw_... node examples/openai-agents.mjs
//
// then decide the request in the gateway's inbox.
import { pathToFileURL } from "node:url";

import { Agent, Usage, setTracingDisabled, tool } from "@openai/agents";

import { Gateway } from "approval-gateway-client";
import { GatewayApprovals } from "approval-gateway-client/openai-agents";

/** A Model that plays its turns in order; a turn that follows a tool's output may read it. */
export class ScriptedModel {
  constructor(turns) {
    this.turns = turns;
    this.seen = [];
  }

  async getResponse(request) {
    this.seen.push(request.input);
    const turn = this.turns.shift();
    if (!turn) throw new Error("the script has no more turns");
    return { usage: new Usage(), output: typeof turn === "function" ? turn(request) : turn };
  }

  async *getStreamedResponse() {
    throw new Error("the scripted model does not stream");
  }
}

const call = (name, args) => ({
  type: "function_call",
  callId: `call-${crypto.randomUUID()}`,
  name,
  status: "completed",
  arguments: JSON.stringify(args),
});
const say = (text) => ({
  type: "message",
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text }],
});

/** The tool output the model was last given, as it read it. */
function lastOutput(request) {
  const items = Array.isArray(request.input) ? request.input : [];
  const output = items.filter((item) => item.type === "function_call_result").at(-1)?.output;
  return typeof output === "string" ? output : (output?.text ?? JSON.stringify(output));
}

/** One run: pay is called, the gateway decides; a reviewer's edit is followed by a second
 * call with the approved arguments, as the rejection's message asks. Returns what pay was
 * called with (or null) and the run's final text. */
export async function main(gateway) {
  setTracingDisabled(true); // nothing leaves the machine
  const paid = [];
  const pay = tool({
    name: "pay",
    description: "Pay an invoice.",
    parameters: {
      type: "object",
      properties: { invoice: { type: "string" }, amount: { type: "number" } },
      required: ["invoice", "amount"],
      additionalProperties: false,
    },
    strict: true,
    execute: async (args) => {
      paid.push(args);
      return `paid ${args.amount} for invoice ${args.invoice}`;
    },
  });
  const model = new ScriptedModel([
    [call("pay", { invoice: "118", amount: 120 })],
    (request) => {
      // After a reviewer's edit the model is told the approved arguments: it calls again.
      const told = lastOutput(request);
      const edited = told.match(/other arguments: (\{.*\})\. Call/);
      return edited ? [call("pay", JSON.parse(edited[1]))] : [say(`The gateway said: ${told}`)];
    },
    (request) => [say(`The gateway said: ${lastOutput(request)}`)],
  ]);
  const approvals = new GatewayApprovals(gateway, { timeout: 300 });
  const agent = new Agent({ name: "billing", instructions: "Pay what is asked.", model, tools: [approvals.gate(pay)] });
  const result = await approvals.run(agent, "Pay invoice 118.");
  return { paid: paid[0] ?? null, text: result.finalOutput };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const gateway = new Gateway({
    url: process.env.GATEWAY_URL ?? "http://127.0.0.1:8000",
    token: process.env.GATEWAY_TOKEN ?? "",
    agent: "openai-agents-example",
  });
  console.log("Decide the request for pay in the gateway's inbox…");
  console.log(await main(gateway));
}
