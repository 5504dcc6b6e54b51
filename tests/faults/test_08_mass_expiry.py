"""20,000 suspensions past their deadline at once: each expires once, the server answers.

The rows are written straight into the database (runs suspended at a transfer, each with one
pending suspension whose deadline has passed), in one transaction, as if the deadlines
worker had been down for a while. The sweeper must time each out exactly once while
/healthz and the inbox's API keep answering.
"""

import threading
import time

from tests.faults.harness import Gateway
from tests.faults.history import Figures, check

COUNT = 20_000
EXPIRY_BUDGET = 240  # seconds for all of them
SLOW_ANSWER = 2.0  # seconds: an answer slower than this is a violation

INSERT = """
CREATE TEMP TABLE mass AS
SELECT gen_random_uuid() AS thread, gen_random_uuid() AS suspension,
       gen_random_uuid() AS grp, 'toolu_' || substr(md5(random()::text || g), 1, 24) AS tool_use,
       g AS n
FROM generate_series(1, %(count)s) g;

INSERT INTO agents_thread (id, agent_id, status, title, result, error, created_by_id,
    created_by_name, created_at, updated_at, requeues, runnable_since, lease_owner,
    lease_expires_at, input_prompt, external_run_id, running_tool)
SELECT thread, %(agent)s, 'suspended', 'mass expiry ' || n, '', '', NULL, '',
    now() - interval '1 hour', now() - interval '1 hour', 0, NULL, '', NULL, '', '', ''
FROM mass;

INSERT INTO agents_stackframe (thread_id, parent_id, depth, agent_name, agent_type, status,
    instance, requeues, lease_owner, input_tokens, output_tokens, tools_used,
    messages, system_prompt, model, iteration, max_iterations, max_tokens, tools,
    tool_overrides, parent_tool_use_id, result, created_at, updated_at, running_tool)
SELECT thread, NULL, 0, 'pay', 'main', 'active', 0, 0, '', 0, 0, '[]'::jsonb,
    jsonb_build_array(
        jsonb_build_object('role', 'user', 'content', 'mass expiry ' || n),
        jsonb_build_object('role', 'assistant', 'content', jsonb_build_array(
            jsonb_build_object('type', 'text', 'text', 'Paying the invoice.'),
            jsonb_build_object('type', 'tool_use', 'id', tool_use, 'name', 'transfer_funds',
                'input', %(input)s::jsonb)))),
    '', 'scripted', 1, 10, 4096, '["transfer_funds"]'::jsonb, %(overrides)s::jsonb, '', '',
    now() - interval '1 hour', now() - interval '1 hour', ''
FROM mass;

INSERT INTO agents_suspension (id, thread_id, frame_id, "group", agent_name, lineage,
    tool_use_id, tool_name, tool_input, tool_schema, kind, prompt, status, approved, reason,
    modified_args, response, decided_by_id, decided_by_name, decided_at, timeout, expires_at,
    on_timeout, resumed_at, created_at, reminders, reminders_sent, escalate_to,
    extended_by_name, extension_reason, policy, args_hash, tool_digest, ignored_by_name,
    presentation, receipt)
SELECT m.suspension, m.thread, f.id, m.grp, 'pay', 'main', m.tool_use, 'transfer_funds',
    %(input)s::jsonb, '{"type": "object"}'::jsonb, 'confirmation', 'Paying the invoice.',
    'pending', NULL, '', NULL, NULL, NULL, '', NULL, 60,
    now() - interval '1 second' * (1 + m.n %% 50), 'reject', NULL, now() - interval '1 hour',
    '[]'::jsonb, 0, '', '', '', '{}'::jsonb, '', '', '', '{}'::jsonb, ''
FROM mass m JOIN agents_stackframe f ON f.thread_id = m.thread;
"""


def test_twenty_thousand_expired_suspensions(gw: Gateway) -> None:
    figures = Figures("20,000 expired suspensions")
    agent = gw.sql("SELECT id FROM agents_agentdefinition WHERE name = 'pay'")[0][0]
    transfer = '{"from_account": "ACC-1", "to_account": "ACC-2", "amount": 10, "currency": "EUR"}'
    overrides = '{"transfer_funds": {"execution_mode": "blocking", "timeout": 60}}'
    with gw.db() as conn, conn.transaction():
        params = {"count": COUNT, "agent": agent, "input": transfer, "overrides": overrides}
        for statement in INSERT.split(";\n\n"):
            conn.execute(statement, params)
        threads = [r[0] for r in conn.execute("SELECT thread::text FROM mass").fetchall()]
    inserted_at = time.monotonic()
    figures.faults = 1

    slowest: dict[str, float] = {"/healthz": 0.0, "/api/suspensions": 0.0}
    failures: list[str] = []
    probing = True

    def probe() -> None:
        paths = {"/healthz": "/healthz", "/api/suspensions": "/api/suspensions?limit=50"}
        while probing:
            for name, path in paths.items():
                began = time.monotonic()
                try:
                    status, _ = gw.call("GET", path, timeout=10)
                except OSError as e:
                    failures.append(f"{name}: {e}")
                    continue
                took = time.monotonic() - began
                slowest[name] = max(slowest[name], took)
                if status != 200:
                    failures.append(f"{name}: {status}")
            time.sleep(0.2)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        deadline = inserted_at + EXPIRY_BUDGET
        while True:
            pending = gw.sql(
                "SELECT count(*) FROM agents_suspension WHERE status = 'pending'"
                " AND thread_id = ANY(%s::uuid[])",
                threads,
            )[0][0]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(1)
        expired_in = time.monotonic() - inserted_at
    finally:
        probing = False
        prober.join()

    v = figures.violations
    if pending:
        v.append(f"{pending} of {COUNT} still pending after {EXPIRY_BUDGET}s")
    for name, took in slowest.items():
        if took > SLOW_ANSWER:
            v.append(f"{name} took {took:.2f}s while the suspensions expired")
    v += failures[:10]
    still_suspended = gw.sql(
        "SELECT count(*) FROM agents_thread WHERE status = 'suspended' AND id = ANY(%s::uuid[])",
        threads,
    )[0][0]
    if still_suspended and not pending:
        v.append(f"{still_suspended} runs stayed suspended after their suspension expired")
    ended = COUNT - gw.unfinished(threads)
    # The 20,000 resumes that follow take the workers minutes: the runs are checked for what
    # has happened (one deadline each, no rejected transfer run), not waited for.
    with gw.db() as conn:
        check(conn, figures, threads, expect_final=False)
    figures.recovery = [expired_in]
    figures.extra = {
        "expired per second": f"{COUNT / expired_in:.0f}",
        "slowest /healthz": f"{slowest['/healthz']:.2f}s",
        "slowest /api/suspensions": f"{slowest['/api/suspensions']:.2f}s",
        "runs ended meanwhile": ended,
        "recovery": "until every suspension had expired",
    }
    figures.report()
