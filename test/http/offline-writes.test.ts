// Offline writes over HTTP (docs/offline-writes.md): every single-object
// answer carries an ETag, the same on the GET and on the write that made the
// version; PATCH and DELETE take If-Match, and a stale version is 412
// precondition_failed with the current object, nothing written (two phones
// editing the same object offline, and the same race in parallel); `*`, weak
// and malformed tags; Idempotency-Key replays after a day offline.
import { describe, expect, it } from "vitest";
import { api, db, registerUser, type TestUser } from "../helpers.ts";
import { createCommunity, createEvent } from "../support/event-fixtures.ts";
import { nodeOf } from "../support/sql-fixtures.ts";
import { createTask } from "../support/tasks.ts";

const ETAG = /^"[0-9]+"$/;

const call = (
  user: TestUser,
  method: string,
  path: string,
  options: { body?: unknown; ifMatch?: string; key?: string } = {}
) => {
  const headers: Record<string, string> = {};
  if (options.ifMatch !== undefined) headers["if-match"] = options.ifMatch;
  if (options.key !== undefined) headers["idempotency-key"] = options.key;
  return api(method, path, {
    token: user.accessToken,
    body: options.body,
    headers,
  });
};

/** The ETag of a GET of `path`. */
async function etagOf(user: TestUser, path: string): Promise<string> {
  const res = await call(user, "GET", path);
  expect(res.status).toBe(200);
  const etag = res.headers.get("etag");
  expect(etag).toMatch(ETAG);
  return etag!;
}

describe("ETag on single objects", () => {
  it("a task: the write answers the version the next GET answers; each write makes a new one", async () => {
    const user = await registerUser("ow-etag");
    const created = await call(user, "POST", "/api/mobile/tasks", {
      body: { title: "v0" },
    });
    expect(created.status).toBe(201);
    const v0 = created.headers.get("etag");
    expect(v0).toMatch(ETAG);
    const path = `/api/mobile/tasks/${created.body.task.id}`;
    expect(await etagOf(user, path)).toBe(v0);

    const patched = await call(user, "PATCH", path, {
      body: { title: "v1" },
      ifMatch: v0!,
    });
    expect(patched.status).toBe(200);
    const v1 = patched.headers.get("etag");
    expect(v1).toMatch(ETAG);
    expect(v1).not.toBe(v0);
    expect(await etagOf(user, path)).toBe(v1);

    const started = await call(user, "POST", `${path}/start`);
    expect(started.headers.get("etag")).not.toBe(v1);
    expect(await etagOf(user, path)).toBe(started.headers.get("etag"));
  });

  it("the profile, a connection and an event answer one too", async () => {
    const me = await registerUser("ow-etags");
    const them = await registerUser("ow-etags-them");
    await etagOf(me, "/api/mobile/profile");
    const connection = await call(me, "POST", "/api/mobile/connections", {
      body: { target_node_id: await nodeOf(them.userId) },
    });
    expect(connection.status).toBe(201);
    expect(
      await etagOf(
        me,
        `/api/mobile/connections/${connection.body.connection.id}`
      )
    ).toBe(connection.headers.get("etag"));
    const event = await createEvent({
      communityId: (await createCommunity()).id,
      starts: "1 day",
    });
    await etagOf(me, `/api/mobile/events/${event.id}`);
    // By node id: the same event, the same version.
    expect(await etagOf(me, `/api/mobile/events/${event.nodeId}`)).toBe(
      await etagOf(me, `/api/mobile/events/${event.id}`)
    );
  });
});

describe("If-Match: two phones edit the same task offline", () => {
  it("the second gets 412 with the first one's version, and nothing is overwritten", async () => {
    const user = await registerUser("ow-two-phones");
    const task = await createTask(user, {
      title: "Call Acme",
      description: "before",
    });
    const path = `/api/mobile/tasks/${task.id}`;
    // Both phones synced the same version before going offline.
    const synced = await etagOf(user, path);

    const first = await call(user, "PATCH", path, {
      body: { title: "Call Acme on Monday" },
      ifMatch: synced,
    });
    expect(first.status).toBe(200);

    const second = await call(user, "PATCH", path, {
      body: { description: "phone B overwrote this" },
      ifMatch: synced,
    });
    expect(second.status).toBe(412);
    expect(second.body.error).toBe("precondition_failed");
    expect(second.body.details.etag).toBe(first.headers.get("etag"));
    expect(second.body.details.current).toEqual(first.body.task);

    const [row] = await db()`select meta from app.tasks where id = ${task.id}`;
    expect(row!.meta).toEqual({
      title: "Call Acme on Monday",
      description: "before",
      status: "pending",
    });

    // Phone B merges and sends again with the current version: accepted.
    const merged = await call(user, "PATCH", path, {
      body: { description: "merged" },
      ifMatch: second.body.details.etag,
    });
    expect(merged.status).toBe(200);
    expect(merged.body.task.meta).toEqual({
      title: "Call Acme on Monday",
      description: "merged",
      status: "pending",
    });
  });

  it("in parallel, with the same version: exactly one write wins, the other is 412", async () => {
    const user = await registerUser("ow-parallel");
    const task = await createTask(user, { title: "start" });
    const path = `/api/mobile/tasks/${task.id}`;
    const synced = await etagOf(user, path);
    const answers = await Promise.all(
      ["a", "b", "c", "d"].map((phone) =>
        call(user, "PATCH", path, {
          body: { title: `phone ${phone}` },
          ifMatch: synced,
        })
      )
    );
    const statuses = answers.map((res) => res.status).sort();
    expect(statuses).toEqual([200, 412, 412, 412]);
    const winner = answers.find((res) => res.status === 200)!;
    const [row] =
      await db()`select meta->>'title' as title from app.tasks where id = ${task.id}`;
    expect(row!.title).toBe(winner.body.task.meta.title);
    for (const lost of answers.filter((res) => res.status === 412))
      expect(lost.body.details.current).toEqual(winner.body.task);
  });

  it("DELETE with a stale version is 412 and the task stays; with the current one, 204", async () => {
    const user = await registerUser("ow-delete");
    const task = await createTask(user, { title: "keep me" });
    const path = `/api/mobile/tasks/${task.id}`;
    const synced = await etagOf(user, path);
    const edited = await call(user, "PATCH", path, {
      body: { title: "edited elsewhere" },
    });
    expect(edited.status).toBe(200);

    const stale = await call(user, "DELETE", path, { ifMatch: synced });
    expect(stale.status).toBe(412);
    expect(stale.body.details.current.meta.title).toBe("edited elsewhere");
    expect(
      (await db()`select 1 from app.tasks where id = ${task.id}`).length
    ).toBe(1);

    expect(
      (
        await call(user, "DELETE", path, {
          ifMatch: edited.headers.get("etag")!,
        })
      ).status
    ).toBe(204);
    expect(
      (await db()`select 1 from app.tasks where id = ${task.id}`).length
    ).toBe(0);
  });
});

describe("If-Match as HTTP says", () => {
  it("`*` matches any version; a list matches when it names the current one; a weak tag never matches", async () => {
    const user = await registerUser("ow-star");
    const task = await createTask(user, { title: "t" });
    const path = `/api/mobile/tasks/${task.id}`;
    expect(
      (
        await call(user, "PATCH", path, {
          body: { title: "star" },
          ifMatch: "*",
        })
      ).status
    ).toBe(200);
    const current = await etagOf(user, path);
    expect(
      (
        await call(user, "PATCH", path, {
          body: { title: "list" },
          ifMatch: `"1", ${current}`,
        })
      ).status
    ).toBe(200);
    const now = await etagOf(user, path);
    const weak = await call(user, "PATCH", path, {
      body: { title: "weak" },
      ifMatch: `W/${now}`,
    });
    expect(weak.status).toBe(412);
    expect(weak.body.error).toBe("precondition_failed");
  });

  it("`*` on a task that does not exist is 404, not a write", async () => {
    const user = await registerUser("ow-star-404");
    const res = await call(
      user,
      "PATCH",
      `/api/mobile/tasks/${crypto.randomUUID()}`,
      { body: { title: "x" }, ifMatch: "*" }
    );
    expect(res.status).toBe(404);
  });

  it.each([
    ["no quotes", "abc"],
    ["unterminated", '"unterminated'],
    ["no comma", '"a" "b"'],
    ["* in a list", '*, "a"'],
    ["a trailing comma", '"a",'],
    ["a weak tag without quotes", "W/abc"],
    ["5,000 characters", `"${"x".repeat(5000)}"`],
  ])(
    "a malformed If-Match (%s) is a 4xx and changes nothing",
    async (_, header) => {
      const user = await registerUser("ow-malformed");
      const task = await createTask(user, { title: "same" });
      const path = `/api/mobile/tasks/${task.id}`;
      // The tasks' 422 is the Simple body (a message); their 400 the Error body.
      const patch = await call(user, "PATCH", path, {
        body: { title: "changed" },
        ifMatch: header,
      });
      expect(patch.status).toBe(422);
      expect(patch.body.error).toMatch(/^header\.if-match: /);
      const del = await call(user, "DELETE", path, { ifMatch: header });
      expect(del.status).toBe(400);
      expect(del.body.error).toBe("bad_request");
      const [row] =
        await db()`select meta->>'title' as title from app.tasks where id = ${task.id}`;
      expect(row!.title).toBe("same");
    }
  );

  it("another user's stale If-Match learns nothing: 404 as without it", async () => {
    const owner = await registerUser("ow-owner");
    const other = await registerUser("ow-other");
    const task = await createTask(owner, { title: "mine" });
    const res = await call(other, "PATCH", `/api/mobile/tasks/${task.id}`, {
      body: { title: "x" },
      ifMatch: '"1"',
    });
    expect(res.status).toBe(404);
    expect(JSON.stringify(res.body)).not.toContain("mine");
  });
});

describe("If-Match on the other objects", () => {
  it("a connection: a stale PATCH is 412 with the current connection; nothing written", async () => {
    const me = await registerUser("ow-conn");
    const them = await registerUser("ow-conn-them");
    const made = await call(me, "POST", "/api/mobile/connections", {
      body: { target_node_id: await nodeOf(them.userId), notes: "n0" },
    });
    const path = `/api/mobile/connections/${made.body.connection.id}`;
    const synced = made.headers.get("etag")!;
    const first = await call(me, "PATCH", path, {
      body: { notes: "n1" },
      ifMatch: synced,
    });
    expect(first.status).toBe(200);
    const second = await call(me, "PATCH", path, {
      body: { notes: "n2" },
      ifMatch: synced,
    });
    expect(second.status).toBe(412);
    expect(second.body.details.current).toEqual(first.body.connection);
    expect(second.body.details.etag).toBe(first.headers.get("etag"));
    const [row] =
      await db()`select notes from app.connections where id = ${made.body.connection.id}`;
    expect(row!.notes).toBe("n1");
  });

  it("the profile: a stale PATCH is 412 with the current profile; nothing written", async () => {
    const me = await registerUser("ow-profile");
    const synced = await etagOf(me, "/api/mobile/profile");
    const first = await call(me, "PATCH", "/api/mobile/profile", {
      body: { name: "Ada One" },
      ifMatch: synced,
    });
    expect(first.status).toBe(200);
    const second = await call(me, "PATCH", "/api/mobile/profile", {
      body: { name: "Ada Two" },
      ifMatch: synced,
    });
    expect(second.status).toBe(412);
    expect(second.body.details.current).toEqual(first.body.data);
    const [row] =
      await db()`select name from app.profiles where id = ${me.userId}`;
    expect(row!.name).toBe("Ada One");
  });

  it("an event: a stale PATCH by a manager is 412 with the current event; nothing written", async () => {
    const manager = await registerUser("ow-event");
    const community = await createCommunity(manager.email);
    const event = await createEvent({
      communityId: community.id,
      starts: "1 day",
    });
    const path = `/api/mobile/events/${event.id}`;
    const synced = await etagOf(manager, path);
    await db()`update app.events set description = 'changed by the platform' where id = ${event.id}`;
    const stale = await call(manager, "PATCH", path, {
      body: { image_path: null },
      ifMatch: synced,
    });
    expect(stale.status).toBe(412);
    expect(stale.body.details.current.description).toBe(
      "changed by the platform"
    );
    expect(stale.body.details.etag).toBe(await etagOf(manager, path));
    const current = await call(manager, "PATCH", path, {
      body: { image_path: null },
      ifMatch: stale.body.details.etag,
    });
    expect(current.status).toBe(200);
    expect(current.headers.get("etag")).toBe(await etagOf(manager, path));
    expect(current.headers.get("etag")).not.toBe(stale.body.details.etag);
  });
});

describe("Idempotency-Key after a day offline", () => {
  it("a PATCH whose answer was lost, replayed 30 hours later with its key, gets the stored answer, not a 412", async () => {
    const user = await registerUser("ow-replay");
    const task = await createTask(user, { title: "before" });
    const path = `/api/mobile/tasks/${task.id}`;
    const synced = await etagOf(user, path);
    const key = crypto.randomUUID();
    const sent = await call(user, "PATCH", path, {
      body: { title: "offline edit" },
      ifMatch: synced,
      key,
    });
    expect(sent.status).toBe(200);
    // The phone never saw the answer and stayed offline for 30 hours.
    await db()`update app.idempotency_keys set created_at = created_at - interval '30 hours' where user_id = ${user.userId}`;
    const replayed = await call(user, "PATCH", path, {
      body: { title: "offline edit" },
      ifMatch: synced,
      key,
    });
    expect(replayed.status).toBe(200);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(replayed.body).toEqual(sent.body);
    expect(replayed.headers.get("etag")).toBe(sent.headers.get("etag"));
  });
});
