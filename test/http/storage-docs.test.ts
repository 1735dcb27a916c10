// docs/storage.md's supabase-js blocks, run as written, each in a Node
// process of its own (this machine's Node: 20 and 24 on CI): supabase-js 2.x
// makes a realtime client with every client, which throws on Node 20
// without the `ws` transport the blocks give. The first signs in at
// /auth/v1 with the anon key, uploads and downloads a note; the second, with
// an access token, goes through every call it lists on the avatars bucket.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { apiKey, baseUrl, registerUser } from '../helpers.ts';
import { jsBlockAfter, writeSnippet } from '../support/docs-snippet.ts';
import { testDir } from '../support/test-dir.ts';

/**
 * Runs a written snippet; the JSON of its last line of output. Asynchronous:
 * the gateway it talks to runs in this process, so a synchronous spawn
 * would leave the snippet's requests unanswered.
 */
async function run(file: string, env: Record<string, string>): Promise<any> {
  const { stdout } = await promisify(execFile)(process.execPath, [file], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

describe("docs/storage.md's supabase-js blocks, run as written", () => {
  it('one client: signs in with the anon key, uploads and downloads', async () => {
    const user = await registerUser('storage-docs');
    const file = writeSnippet('storage-snippet', 'test/http/storage-docs.test.ts', [
      'const BASE_URL = process.env.BASE_URL',
      'const SUPABASE_ANON_KEY = process.env.ANON_KEY',
      'const email = process.env.EMAIL',
      'const password = process.env.PASSWORD',
      "const file = new Blob(['a note the docs stored'], { type: 'text/plain' })",
      jsBlockAfter('storage.md', '## supabase-js'),
      'console.log(JSON.stringify({ user: user.id, downloaded: await data.text() }))',
      'process.exit(0)',
    ]);
    const out = await run(file, { BASE_URL: baseUrl, ANON_KEY: await apiKey('anon'), EMAIL: user.email, PASSWORD: user.password });
    expect(out).toEqual({ user: user.userId, downloaded: 'a note the docs stored' });
  });

  it('with an access token: every call of the avatars block', async () => {
    const user = await registerUser('storage-docs-avatar');
    const jpeg = path.join(testDir, `avatar-${user.userId}.jpg`);
    fs.writeFileSync(jpeg, await sharp({ create: { width: 320, height: 320, channels: 3, background: { r: 200, g: 120, b: 40 } } }).jpeg().toBuffer());
    const file = writeSnippet('storage-avatars-snippet', 'test/http/storage-docs.test.ts', [
      "import fs from 'node:fs'",
      'const BASE_URL = process.env.BASE_URL',
      'const accessToken = process.env.ACCESS_TOKEN',
      'const userId = process.env.USER_ID',
      "const file = new Blob([fs.readFileSync(process.env.JPEG)], { type: 'image/jpeg' })",
      jsBlockAfter('storage.md', '## supabase-js', 1),
      'const { data: listed, error } = await avatars.list(userId)',
      'console.log(JSON.stringify({ error, names: listed?.map((f) => f.name), url: avatars.getPublicUrl(`${userId}/me.jpg`).data.publicUrl }))',
      'process.exit(0)',
    ]);
    const out = await run(file, { BASE_URL: baseUrl, ACCESS_TOKEN: user.accessToken, USER_ID: user.userId, JPEG: jpeg });
    // me.jpg moved to old.jpg, copied back to me.jpg, old.jpg removed.
    expect(out).toEqual({ error: null, names: ['me.jpg'], url: `${baseUrl}/storage/v1/object/public/avatars/${user.userId}/me.jpg` });
    const served = await fetch(out.url);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/jpeg');
  });
});
