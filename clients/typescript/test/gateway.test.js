// The client against a live gateway (test/gateway.py starts manage.py serve, as tests/external
// do for the Python client): decisions, deadlines, aborts, the gateway's refusals, receipts,
// and the two adapters' examples with their scripted models.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  canonicalHash,
  canonicalJson,
  Conflict,
  Forbidden,
  Gateway,
  ReceiptInvalid,
  Rejected,
  StillPending,
  TimedOut,
  verifyReceipt,
} from "approval-gateway-client";

import { main as aiSdkExample } from "../examples/ai-sdk.mjs";
import { main as openAiAgentsExample } from "../examples/openai-agents.mjs";
import { Reviewer, startGateway } from "./live.js";

const TRANSFER_SCHEMA = {
  type: "object",
  properties: { to: { type: "string" }, amount: { type: "number" } },
  required: ["to", "amount"],
};

let live;
let reviewer;
const agent = (name) => new Gateway({ url: live.url, token: live.tokens.agent, agent: name });

before(async () => {
  live = await startGateway();
  reviewer = new Reviewer(live.url, live.tokens.reviewer);
});
after(() => live?.stop());

describe("requestApproval", () => {
  test("an approval with an edit returns the edited arguments, and its receipt verifies", async () => {
    const gateway = agent("ts-edit");
    const [decision] = await Promise.all([
      gateway.requestApproval("transfer", { to: "acme", amount: 100 }, { schema: TRANSFER_SCHEMA }),
      reviewer.decide("ts-edit", { approved: true, modifiedArgs: { to: "acme", amount: 40 } }),
    ]);
    assert.equal(decision.status, "approved");
    assert.deepEqual(decision.arguments, { to: "acme", amount: 40 });
    assert.equal(decision.decided_by, "alice");

    const jwks = await gateway.jwks();
    const claims = await verifyReceipt(decision, jwks);
    assert.equal(claims.suspension, decision.id);
    assert.equal(claims.edited, true);
    assert.equal(claims.decider.name, "alice");

    // The arguments the receipt did not approve, another request, a forged signature.
    await assert.rejects(
      verifyReceipt({ ...decision, arguments: { to: "acme", amount: 4000 } }, jwks),
      (e) => e instanceof ReceiptInvalid && /arguments/.test(e.message),
    );
    await assert.rejects(
      verifyReceipt({ ...decision, id: crypto.randomUUID() }, jwks),
      (e) => e instanceof ReceiptInvalid && /about/.test(e.message),
    );
    // A receipt changed to approve other arguments: its signature no longer matches.
    const more = { to: "acme", amount: 4000 };
    const [header, payload, signature] = decision.receipt.split(".");
    const said = JSON.parse(Buffer.from(payload, "base64url").toString());
    said.args_hash = await canonicalHash(more);
    const forged = [header, Buffer.from(canonicalJson(said)).toString("base64url"), signature].join(".");
    await assert.rejects(
      verifyReceipt({ ...decision, arguments: more, receipt: forged }, jwks),
      (e) => e instanceof ReceiptInvalid && /signature/.test(e.message),
    );
    await assert.rejects(verifyReceipt(decision, { keys: [] }), ReceiptInvalid);
  });

  test("a rejection throws Rejected with the reviewer's reason and name", async () => {
    const gateway = agent("ts-reject");
    const [outcome] = await Promise.allSettled([
      gateway.requestApproval("transfer", { to: "acme", amount: 100 }, { schema: TRANSFER_SCHEMA }),
      reviewer.decide("ts-reject", { approved: false, reason: "Not this month." }),
    ]);
    assert.equal(outcome.status, "rejected");
    assert.ok(outcome.reason instanceof Rejected);
    assert.equal(outcome.reason.reason, "Not this month.");
    assert.equal(outcome.reason.decidedBy, "alice");
    assert.equal(outcome.reason.request.status, "rejected");
  });

  test("nobody deciding before the deadline throws TimedOut", async () => {
    const gateway = agent("ts-deadline");
    await assert.rejects(
      gateway.requestApproval("transfer", { to: "acme", amount: 1 }, { timeout: 1 }),
      (e) => e instanceof TimedOut && e.request.status === "timed_out",
    );
  });

  test("a decision not taken within the caller's wait throws StillPending", async () => {
    const gateway = agent("ts-within");
    await assert.rejects(
      gateway.requestApproval("transfer", { to: "acme", amount: 1 }, { within: 1 }),
      (e) => e instanceof StillPending && e.request.status === "pending",
    );
  });

  test("an aborted wait rejects with the signal's reason; the request stays pending", async () => {
    const gateway = agent("ts-abort");
    const controller = new AbortController();
    const waiting = gateway.requestApproval("transfer", { to: "acme", amount: 1 }, { signal: controller.signal });
    const pending = await reviewer.pending("ts-abort");
    controller.abort();
    await assert.rejects(waiting, { name: "AbortError" });
    assert.equal((await gateway.get(pending.id)).status, "pending");
  });

  test("the same idempotency key raises one request", async () => {
    const gateway = agent("ts-key");
    const first = await gateway.raiseRequest("transfer", { to: "acme", amount: 1 }, { key: "k-1" });
    const again = await gateway.raiseRequest("transfer", { to: "acme", amount: 1 }, { key: "k-1" });
    assert.equal(again.id, first.id);
  });

  test("ask returns the reviewer's answer", async () => {
    const gateway = agent("ts-ask");
    const [answer] = await Promise.all([
      gateway.ask("Which account?"),
      reviewer.decide("ts-ask", { response: "The savings one." }),
    ]);
    assert.equal(answer, "The savings one.");
  });
});

describe("the gateway's refusals, typed", () => {
  test("a second, different decision is a Conflict that says who decided", async () => {
    const gateway = agent("ts-conflict");
    const made = await gateway.raiseRequest("transfer", { to: "acme", amount: 1 });
    await reviewer.decide("ts-conflict", { approved: true });
    await assert.rejects(
      reviewer.gateway.decide(made, { approved: false, reason: "Too late?" }),
      (e) => e instanceof Conflict && e.status === 409 && e.decidedBy === "alice" && e.code === "already_decided",
    );
  });

  test("deciding one's own request is Forbidden with the policy's rule", async () => {
    const gateway = new Gateway({ url: live.url, token: live.tokens.selfReviewer, agent: "ts-four-eyes" });
    const made = await gateway.raiseRequest("transfer", { to: "acme", amount: 1 });
    await assert.rejects(
      gateway.decide(made, { approved: true }),
      (e) => e instanceof Forbidden && e.code === "forbidden_by_policy" && typeof e.rule === "string" && e.rule.length > 0,
    );
  });
});

describe("adapters, their examples with scripted models", () => {
  test("AI SDK: the tool runs with the arguments a reviewer approved", async () => {
    const gateway = agent("ts-ai-sdk");
    const [run] = await Promise.all([
      aiSdkExample(gateway),
      reviewer.decide("ts-ai-sdk", { approved: true, modifiedArgs: { invoice: "118", amount: 100 } }),
    ]);
    assert.deepEqual(run.paid, { invoice: "118", amount: 100 });
    assert.deepEqual(run.result, { paid: 100, invoice: "118" });
  });

  test("AI SDK: a rejection is the tool's result, with the reason", async () => {
    const gateway = agent("ts-ai-sdk-no");
    const [run] = await Promise.all([
      aiSdkExample(gateway),
      reviewer.decide("ts-ai-sdk-no", { approved: false, reason: "Invoice 118 is disputed." }),
    ]);
    assert.equal(run.paid, null);
    assert.equal(run.result.approved, false);
    assert.equal(run.result.reason, "Invoice 118 is disputed.");
    assert.equal(run.result.message, "Rejected by alice: Invoice 118 is disputed.");
  });

  test("OpenAI Agents SDK: an approval answers the interruption and the tool runs", async () => {
    const gateway = agent("ts-agents");
    const [run] = await Promise.all([
      openAiAgentsExample(gateway),
      reviewer.decide("ts-agents", { approved: true }),
    ]);
    assert.deepEqual(run.paid, { invoice: "118", amount: 120 });
    assert.match(run.text, /paid 120 for invoice 118/);
  });

  test("OpenAI Agents SDK: an edit makes the model call again with the approved arguments", async () => {
    const gateway = agent("ts-agents-edit");
    const [run] = await Promise.all([
      openAiAgentsExample(gateway),
      reviewer.decide("ts-agents-edit", { approved: true, modifiedArgs: { invoice: "118", amount: 90 } }),
    ]);
    assert.deepEqual(run.paid, { invoice: "118", amount: 90 });
    assert.match(run.text, /paid 90 for invoice 118/);
  });

  test("OpenAI Agents SDK: a rejection answers the interruption with the reason", async () => {
    const gateway = agent("ts-agents-no");
    const [run] = await Promise.all([
      openAiAgentsExample(gateway),
      reviewer.decide("ts-agents-no", { approved: false, reason: "Invoice 118 is disputed." }),
    ]);
    assert.equal(run.paid, null);
    assert.match(run.text, /Rejected by alice: Invoice 118 is disputed\./);
  });
});
