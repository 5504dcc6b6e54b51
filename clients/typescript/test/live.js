// A live gateway for the tests (test/gateway.py: manage.py serve on a fresh data folder and a
// free port, as tests/external start one), and a reviewer who decides over its API.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Gateway } from "approval-gateway-client";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const python = process.env.GATEWAY_PYTHON ?? `${root}.venv/bin/python`;

export async function startGateway() {
  const child = spawn(python, [fileURLToPath(new URL("./gateway.py", import.meta.url))], {
    cwd: root,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout });
  const [line] = await Promise.race([
    once(lines, "line"),
    once(child, "exit").then(([code]) => {
      throw new Error(`test/gateway.py exited (${code}) before serving`);
    }),
  ]);
  const { url, tokens } = JSON.parse(line);
  return {
    url,
    tokens,
    async stop() {
      child.stdin.end();
      if (child.exitCode === null) await once(child, "exit");
    },
  };
}

/** A reviewer: decides the next pending request of `agent` over the API, as a person would. */
export class Reviewer {
  constructor(url, token) {
    this.gateway = new Gateway({ url, token, agent: "reviewer" });
  }

  async pending(agent) {
    for (let i = 0; i < 600; i++) {
      const page = await this.gateway.call(
        "GET",
        `/api/suspensions?status=pending&agent=${encodeURIComponent(agent)}`,
      );
      if (page.results.length) return page.results[0];
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`no pending request of ${agent}`);
  }

  /** Waits for `agent`'s request, decides it; the request as the reviewer saw it. */
  async decide(agent, decision) {
    const request = await this.pending(agent);
    await this.gateway.decide(request, decision);
    return request;
  }
}
