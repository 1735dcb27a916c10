// Storage in the product: a profile's avatar, a community's and an event's
// image are objects of their buckets, set by path over the mobile API and
// answered as absolute public URLs; the public event page's og:image is a
// 1200×630 transformation of a stored image (fetched and measured with
// sharp). Another user's object, or an object outside the folder, is refused.
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { api, baseUrl, db, publicUrl, registerUser } from '../helpers.ts';
import { png, storageClient } from '../support/storage.ts';

const image = async (w: number, h: number) => new Blob([new Uint8Array(await png(w, h))], { type: 'image/png' });
const local = (url: string) => url.replace(publicUrl.replace(/\/+$/, ''), baseUrl);

async function community(managerEmail: string): Promise<string> {
  const [row] = await db()<{ id: string }[]>`select admin.create_community(${`Storage ${Date.now()} ${Math.random()}`}, null, '{}', ${managerEmail}) as id`;
  return row!.id;
}

describe('avatars on profiles', () => {
  it('avatar_url names the gateway the request came through, not the one that started last', async () => {
    const ana = await registerUser('avatar-where');
    expect((await storageClient(baseUrl, ana.accessToken).from('avatars').upload(`${ana.userId}/me.png`, await image(8, 8))).error).toBeNull();
    // Another gateway of the same database, with another PUBLIC_URL, records it when it starts.
    const [before] = await db()<{ value: string | null }[]>`select (select value from private.service_settings where name = 'public_url') as value`;
    await db()`select private.service_setting_set('public_url', 'http://another-gateway.invalid')`;
    try {
      const set = await api('PATCH', '/api/mobile/profile', { token: ana.accessToken, body: { avatar_path: `${ana.userId}/me.png` } });
      expect(set.body.data.avatar_url).toBe(`${publicUrl.replace(/\/+$/, '')}/storage/v1/object/public/avatars/${ana.userId}/me.png`);
    } finally {
      if (before!.value !== null) await db()`select private.service_setting_set('public_url', ${before!.value})`;
    }
  });

  it('PATCH avatar_path sets avatar_url (public, absolute); another user\'s object and null', async () => {
    const ana = await registerUser('avatar-ana');
    const ben = await registerUser('avatar-ben');
    expect((await api('GET', '/api/mobile/profile', { token: ana.accessToken })).body.data.avatar_url).toBeNull();
    const up = await storageClient(baseUrl, ana.accessToken).from('avatars').upload(`${ana.userId}/me.png`, await image(64, 64));
    expect(up.error).toBeNull();
    const benUp = await storageClient(baseUrl, ben.accessToken).from('avatars').upload(`${ben.userId}/me.png`, await image(8, 8));
    expect(benUp.error).toBeNull();

    const set = await api('PATCH', '/api/mobile/profile', { token: ana.accessToken, body: { avatar_path: `${ana.userId}/me.png` } });
    expect(set.status).toBe(200);
    const url = set.body.data.avatar_url as string;
    expect(url).toBe(`${publicUrl.replace(/\/+$/, '')}/storage/v1/object/public/avatars/${ana.userId}/me.png`);
    const fetched = await fetch(local(url));
    expect(fetched.status).toBe(200);
    expect((await sharp(Buffer.from(await fetched.arrayBuffer())).metadata()).width).toBe(64);
    expect((await api('GET', '/api/mobile/profile', { token: ana.accessToken })).body.data.avatar_url).toBe(url);

    // Ben's picture cannot become Ana's avatar; nor can a path that is not there.
    for (const path of [`${ben.userId}/me.png`, `${ana.userId}/nothing.png`]) {
      const refused = await api('PATCH', '/api/mobile/profile', { token: ana.accessToken, body: { avatar_path: path } });
      expect(refused.status).toBe(422);
      expect(refused.body.error).toBe('invalid_image_path');
    }
    expect((await api('PATCH', '/api/mobile/profile', { token: ana.accessToken, body: {} })).status).toBe(422);
    const both = await api('PATCH', '/api/mobile/profile', { token: ana.accessToken, body: { name: 'Ana A.', avatar_path: null } });
    expect(both.status).toBe(200);
    expect(both.body.data).toMatchObject({ name: 'Ana A.', avatar_url: null });
  });
});

describe('community and event images', () => {
  it('a manager sets image_path; others are refused; the event page shares a 1200×630 og:image', async () => {
    const manager = await registerUser('img-manager');
    const member = await registerUser('img-member');
    const communityId = await community(manager.email);
    expect((await api('POST', `/api/mobile/communities/${communityId}/join`, { token: member.accessToken })).status).toBeLessThan(300);
    const managerStorage = storageClient(baseUrl, manager.accessToken);
    const memberStorage = storageClient(baseUrl, member.accessToken);

    // Only managers write the community's folder.
    const refusedUpload = await memberStorage.from('community-images').upload(`${communityId}/logo.png`, await image(8, 8));
    expect((refusedUpload.error as { statusCode?: string } | null)?.statusCode).toBe('403');
    expect((await managerStorage.from('community-images').upload(`${communityId}/logo.png`, await image(32, 32))).error).toBeNull();
    const notManager = await api('PATCH', `/api/mobile/communities/${communityId}`, { token: member.accessToken, body: { image_path: `${communityId}/logo.png` } });
    expect(notManager.status).toBe(403);
    const set = await api('PATCH', `/api/mobile/communities/${communityId}`, { token: manager.accessToken, body: { image_path: `${communityId}/logo.png` } });
    expect(set.status).toBe(200);
    expect(set.body.data.image_url).toMatch(new RegExp(`/storage/v1/object/public/community-images/${communityId}/logo\\.png$`));
    const seen = await api('GET', `/api/mobile/communities/${communityId}`, { token: member.accessToken });
    expect(seen.body.data.image_url).toBe(set.body.data.image_url);
    expect((await fetch(local(set.body.data.image_url))).status).toBe(200);

    // An event of the community: its image in event-images/{event id}/.
    const [made] = await db()<{ id: string }[]>`select admin.create_event(${communityId}, 'Poster night', now() + interval '1 day', null, null, null) as id`;
    const [event] = await db()<{ id: string; shortlink: string }[]>`select id, shortlink from app.events where id = ${made!.id}`;
    expect((await managerStorage.from('event-images').upload(`${event!.id}/poster.png`, await image(1600, 1000))).error).toBeNull();
    const wrongFolder = await api('PATCH', `/api/mobile/events/${event!.id}`, { token: manager.accessToken, body: { image_path: `${communityId}/logo.png` } });
    expect(wrongFolder.status).toBe(422);
    expect(wrongFolder.body.error).toBe('invalid_image_path');
    expect((await api('PATCH', `/api/mobile/events/${event!.id}`, { token: member.accessToken, body: { image_path: `${event!.id}/poster.png` } })).status).toBe(403);
    const eventSet = await api('PATCH', `/api/mobile/events/${event!.id}`, { token: manager.accessToken, body: { image_path: `${event!.id}/poster.png` } });
    expect(eventSet.status).toBe(200);
    expect(eventSet.body).toMatchObject({ image_path: `${event!.id}/poster.png` });
    expect(eventSet.body.image_url).toMatch(/\/storage\/v1\/object\/public\/event-images\/.+\/poster\.png$/);

    const page = await fetch(`${baseUrl}/e/${event!.shortlink}`);
    const html = await page.text();
    const og = /<meta property="og:image" content="([^"]+)">/.exec(html)?.[1]?.replaceAll('&amp;', '&');
    expect(og).toMatch(/\/storage\/v1\/render\/image\/public\/event-images\/.+\/poster\.png\?width=1200&height=630&resize=cover$/);
    const preview = await fetch(local(og!));
    expect(preview.status).toBe(200);
    const meta = await sharp(Buffer.from(await preview.arrayBuffer())).metadata();
    expect([meta.width, meta.height]).toEqual([1200, 630]);
  });
});
