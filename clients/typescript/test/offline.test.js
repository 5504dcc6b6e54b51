// What needs no gateway: the canonical hash the receipts use, the types generated from the
// committed OpenAPI document, and 429 answered by a stand-in that says Retry-After.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { canonicalHash, Gateway, TooManyRequests } from "approval-gateway-client";

const here = fileURLToPath(new URL("..", import.meta.url));

test("the canonical hash is the gateway's (agents/hashing.py)", async () => {
  const value = {
    z: [1, 2.5, null, true],
    é: "ünïcode ✓ 😀",
    a: { b: 'line\nbreak "q"', A: -3 },
    "😀": 1,
    "\uffff": 2,
  };
  // canonical_hash(value) in Python, keys sorted by code point (😀 after \uffff).
  assert.equal(
    await canonicalHash(value),
    "7b519b682863b429d66264cb09ccc6d82be7181d080b63749368374693132a97",
  );
});

test("src/schema.d.ts is what openapi-typescript makes of openapi.json", async () => {
  const cli = fileURLToPath(new URL("../node_modules/openapi-typescript/bin/cli.js", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [cli, "openapi.json"], {
    cwd: here,
    maxBuffer: 1 << 26,
  });
  const committed = await readFile(new URL("../src/schema.d.ts", import.meta.url), "utf8");
  assert.ok(stdout === committed, "src/schema.d.ts is stale: run `npm run types` and commit it");
});

test("npm pack ships the compiled modules with their types", async () => {
  // --ignore-scripts: the build ran before the tests (make test-typescript, npm run build).
  const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: here,
  });
  const files = JSON.parse(stdout)[0].files.map((file) => file.path);
  for (const entry of ["index", "ai", "openai-agents", "schema"])
    assert.ok(files.includes(`dist/${entry}.d.ts`), `dist/${entry}.d.ts is not in the package`);
  assert.ok(files.includes("dist/index.js") && files.includes("README.md"));
});

/** A stand-in that answers 429 with `retryAfter` `times` times, then 201. */
async function limited(retryAfter, times) {
  let calls = 0;
  const server = createServer((request, response) => {
    calls += 1;
    response.setHeader("Content-Type", "application/json");
    if (calls <= times) {
      response.writeHead(429, { "Retry-After": String(retryAfter) });
      response.end(JSON.stringify({ error: "rate_limited", detail: "Too many requests.", retry_after: retryAfter }));
      return;
    }
    response.writeHead(201);
    response.end(JSON.stringify({ id: "r-1", status: "pending" }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    calls: () => calls,
    close: () => server.close(),
  };
}

test("a 429 is retried after the Retry-After the gateway sends", async () => {
  const server = await limited(0, 2);
  try {
    const gateway = new Gateway({ url: server.url, token: "t", agent: "a" });
    const made = await gateway.raiseRequest("transfer", {}, { key: "k" });
    assert.equal(made.id, "r-1");
    assert.equal(server.calls(), 3);
  } finally {
    server.close();
  }
});

test("a Retry-After longer than the client waits is surfaced as TooManyRequests", async () => {
  const server = await limited(120, 1);
  try {
    const gateway = new Gateway({ url: server.url, token: "t", agent: "a" });
    await assert.rejects(
      gateway.raiseRequest("transfer", {}, { key: "k" }),
      (e) => e instanceof TooManyRequests && e.retryAfter === 120 && e.code === "rate_limited",
    );
    assert.equal(server.calls(), 1);
  } finally {
    server.close();
  }
});
