// The Vercel AI SDK with the gateway's approval: a scripted model (MockLanguageModelV3, no
// network) calls `pay`; the gateway's reviewers approve it (perhaps with other arguments) or
// reject it, and the model reads the tool's result.
//
//   GATEWAY_URL=http://127.0.0.1:8000 GATEWAY_TOKEN=gw_... node examples/ai-sdk.mjs
//
// then decide the request in the gateway's inbox.
import { pathToFileURL } from "node:url";

import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

import { Gateway } from "approval-gateway-client";
import { gatewayTool } from "approval-gateway-client/ai";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** The model's turns, in order: call pay, then say what happened. */
function scriptedModel() {
  const turns = [
    {
      content: [
        {
          type: "tool-call",
          toolCallId: `call-${crypto.randomUUID()}`,
          toolName: "pay",
          input: JSON.stringify({ invoice: "118", amount: 120 }),
        },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_use" },
      usage,
      warnings: [],
    },
    {
      content: [{ type: "text", text: "Done." }],
      finishReason: { unified: "stop", raw: "end_turn" },
      usage,
      warnings: [],
    },
  ];
  return new MockLanguageModelV3({ doGenerate: async () => turns.shift() });
}

/** One run: the model calls pay through the gateway; returns what pay was called with (or
 * null) and the tool's result the model read. */
export async function main(gateway) {
  const paid = [];
  const pay = tool({
    description: "Pay an invoice.",
    // The JSON Schema the SDK makes of it goes to the gateway: a reviewer's edit must fit it.
    inputSchema: z.object({ invoice: z.string(), amount: z.number().positive() }),
    execute: async (args) => {
      paid.push(args);
      return { paid: args.amount, invoice: args.invoice };
    },
  });
  const result = await generateText({
    model: scriptedModel(),
    tools: { pay: gatewayTool(gateway, "pay", pay, { timeout: 300 }) },
    stopWhen: stepCountIs(3),
    prompt: "Pay invoice 118.",
  });
  const [toolResult] = result.steps.flatMap((step) => step.toolResults);
  return { paid: paid[0] ?? null, result: toolResult?.output, text: result.text };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const gateway = new Gateway({
    url: process.env.GATEWAY_URL ?? "http://127.0.0.1:8000",
    token: process.env.GATEWAY_TOKEN ?? "",
    agent: "ai-sdk-example",
  });
  console.log("Decide the request for pay in the gateway's inbox…");
  console.log(await main(gateway));
}
