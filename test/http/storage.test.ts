// File storage through supabase-js's storage client, as an app uses it
// (`createClient(BASE_URL, ANY_KEY, { accessToken })`): uploads as a Buffer
// (the body) and as a Blob (a multipart form), downloads, info, exists,
// list, remove, move, copy, public URLs, signed download and upload URLs
// (tampered and expired ones refused), Range, ETag and 304, Cache-Control,
// attachments served as downloads, other users' paths. Every JSON answer is
// checked against the OpenAPI document.
import { describe, expect, it } from 'vitest';
import { api, baseUrl, db, registerUser, type TestUser } from '../helpers.ts';
import { png, storageClient } from '../support/storage.ts';

const text = (s: string) => Buffer.from(s, 'utf8');

async function user(prefix: string): Promise<TestUser & { storage: ReturnType<typeof storageClient> }> {
  const u = await registerUser(prefix);
  return { ...u, storage: storageClient(baseUrl, u.accessToken) };
}

describe('objects through supabase-js', () => {
  it('uploads a file as the body and as a form, downloads it, and tells its info and whether it exists', async () => {
    const ada = await user('st-ada');
    const files = ada.storage.from('attachments');
    const up = await files.upload(`${ada.userId}/notes.txt`, text('hello, storage'), { contentType: 'text/plain' });
    expect(up.error).toBeNull();
    expect(up.data).toMatchObject({ path: `${ada.userId}/notes.txt`, fullPath: `attachments/${ada.userId}/notes.txt` });
    expect(up.data!.id).toMatch(/^[0-9a-f-]{36}$/);

    const form = await files.upload(`${ada.userId}/deep/form.txt`, new Blob(['from a form'], { type: 'text/plain' }), { cacheControl: '60' });
    expect(form.error).toBeNull();

    const down = await files.download(`${ada.userId}/notes.txt`);
    expect(down.error).toBeNull();
    expect(await down.data!.text()).toBe('hello, storage');

    const info = await files.info(`${ada.userId}/deep/form.txt`);
    expect(info.error).toBeNull();
    expect(info.data).toMatchObject({ name: `${ada.userId}/deep/form.txt`, bucketId: 'attachments', size: 11, contentType: 'text/plain', cacheControl: 'max-age=60' });

    expect((await files.exists(`${ada.userId}/notes.txt`)).data).toBe(true);
    expect((await files.exists(`${ada.userId}/nothing.txt`)).data).toBe(false);
  });

  it('a second upload to a taken path is 409 Duplicate; upsert and update replace it', async () => {
    const bo = await user('st-bo');
    const files = bo.storage.from('attachments');
    const path = `${bo.userId}/same.txt`;
    expect((await files.upload(path, text('one'))).error).toBeNull();
    const again = await files.upload(path, text('two'));
    expect(again.error).toMatchObject({ status: 409, statusCode: '409', message: 'The resource already exists' });
    const raw = await fetch(`${baseUrl}/storage/v1/object/attachments/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bo.accessToken}`, 'content-type': 'text/plain' },
      body: 'three',
    });
    expect(raw.status).toBe(409);
    expect(await raw.json()).toEqual({ statusCode: '409', error: 'Duplicate', code: 'object_exists', message: 'The resource already exists' });

    expect((await files.upload(path, text('upserted'), { upsert: true })).error).toBeNull();
    expect(await (await files.download(path)).data!.text()).toBe('upserted');
    expect((await files.update(path, text('updated'))).error).toBeNull();
    expect(await (await files.download(path)).data!.text()).toBe('updated');
  });

  it('lists a folder (prefix, limit, offset, search, sort), folders first', async () => {
    const cy = await user('st-cy');
    const files = cy.storage.from('attachments');
    for (const name of ['b.txt', 'a.txt', 'c.txt', 'sub/x.txt', 'sub/y.txt', 'other/z.txt']) {
      expect((await files.upload(`${cy.userId}/${name}`, text(name))).error).toBeNull();
    }
    const all = await files.list(cy.userId);
    expect(all.error).toBeNull();
    expect(all.data!.map((e) => [e.name, e.id === null])).toEqual([
      ['other', true],
      ['sub', true],
      ['a.txt', false],
      ['b.txt', false],
      ['c.txt', false],
    ]);
    expect(all.data![2]!.metadata).toMatchObject({ size: 5, mimetype: 'text/plain;charset=UTF-8' });
    const page = await files.list(cy.userId, { limit: 2, offset: 3, sortBy: { column: 'name', order: 'desc' } });
    expect(page.data!.map((e) => e.name)).toEqual(['b.txt', 'a.txt']);
    expect((await files.list(cy.userId, { search: 'B' })).data!.map((e) => e.name)).toEqual(['b.txt']);
    expect((await files.list(`${cy.userId}/sub`)).data!.map((e) => e.name)).toEqual(['x.txt', 'y.txt']);
    // The bucket's top: only the caller's own folder (row-level security).
    expect((await files.list()).data!.map((e) => e.name)).toEqual([cy.userId]);
  });

  it('moves, copies and removes objects', async () => {
    const di = await user('st-di');
    const files = di.storage.from('attachments');
    await files.upload(`${di.userId}/from.txt`, text('moving'));
    const before = await files.info(`${di.userId}/from.txt`);
    expect((await files.move(`${di.userId}/from.txt`, `${di.userId}/to.txt`)).error).toBeNull();
    expect((await files.exists(`${di.userId}/from.txt`)).data).toBe(false);
    const after = await files.info(`${di.userId}/to.txt`);
    expect(after.data!.id).toBe(before.data!.id);

    const copy = await files.copy(`${di.userId}/to.txt`, `${di.userId}/copy.txt`);
    expect(copy.error).toBeNull();
    expect(copy.data).toEqual({ path: `attachments/${di.userId}/copy.txt` });
    expect(await (await files.download(`${di.userId}/copy.txt`)).data!.text()).toBe('moving');

    const removed = await files.remove([`${di.userId}/to.txt`, `${di.userId}/copy.txt`, `${di.userId}/never.txt`]);
    expect(removed.error).toBeNull();
    expect(removed.data!.map((o) => o.name).sort()).toEqual([`${di.userId}/copy.txt`, `${di.userId}/to.txt`]);
    expect((await files.exists(`${di.userId}/copy.txt`)).data).toBe(false);
  });

  it('another user\'s paths: no upload, no download, no listing, no removal, no move', async () => {
    const owner = await user('st-owner');
    const other = await user('st-other');
    await owner.storage.from('attachments').upload(`${owner.userId}/private.txt`, text('mine'));

    const up = await other.storage.from('attachments').upload(`${owner.userId}/planted.txt`, text('x'));
    expect(up.error).toMatchObject({ status: 403, statusCode: '403' });
    const down = await other.storage.from('attachments').download(`${owner.userId}/private.txt`);
    expect(down.error).toMatchObject({ status: 404 });
    expect((await other.storage.from('attachments').list(owner.userId)).data).toEqual([]);
    expect((await other.storage.from('attachments').remove([`${owner.userId}/private.txt`])).data).toEqual([]);
    expect((await other.storage.from('attachments').move(`${owner.userId}/private.txt`, `${other.userId}/stolen.txt`)).error).toMatchObject({ status: 404 });
    expect((await other.storage.from('attachments').copy(`${owner.userId}/private.txt`, `${other.userId}/stolen.txt`)).error).toMatchObject({ status: 404 });
    expect((await other.storage.from('attachments').createSignedUrl(`${owner.userId}/private.txt`, 60)).error).toMatchObject({ status: 404 });
    expect((await other.storage.from('attachments').createSignedUploadUrl(`${owner.userId}/x.txt`)).error).toMatchObject({ status: 403 });
    // Still there for its owner.
    expect(await (await owner.storage.from('attachments').download(`${owner.userId}/private.txt`)).data!.text()).toBe('mine');
    // Without a credential: 401 in Supabase Storage's body.
    const anonymous = await fetch(`${baseUrl}/storage/v1/object/attachments/${owner.userId}/private.txt`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ statusCode: '401', error: 'InvalidJWT', code: 'unauthorized' });
  });
});

describe('downloads: Range, ETag, Cache-Control, attachments', () => {
  it('answers a range with 206, a held ETag with 304, and the object\'s Cache-Control', async () => {
    const ed = await user('st-ed');
    const path = `${ed.userId}/range.bin`;
    await ed.storage.from('attachments').upload(path, Buffer.from('0123456789abcdef'), { contentType: 'application/octet-stream', cacheControl: '120' });
    const url = `${baseUrl}/storage/v1/object/attachments/${path}`;
    const auth = { authorization: `Bearer ${ed.accessToken}` };
    const full = await fetch(url, { headers: auth });
    expect(full.status).toBe(200);
    expect(full.headers.get('accept-ranges')).toBe('bytes');
    expect(full.headers.get('cache-control')).toBe('private, max-age=120');
    expect(full.headers.get('content-length')).toBe('16');
    const etag = full.headers.get('etag')!;
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);

    const part = await fetch(url, { headers: { ...auth, range: 'bytes=4-7' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 4-7/16');
    expect(await part.text()).toBe('4567');
    const tail = await fetch(url, { headers: { ...auth, range: 'bytes=-3' } });
    expect(await tail.text()).toBe('def');
    const open = await fetch(url, { headers: { ...auth, range: 'bytes=14-' } });
    expect(await open.text()).toBe('ef');
    const beyond = await fetch(url, { headers: { ...auth, range: 'bytes=99-' } });
    expect(beyond.status).toBe(416);
    expect(await beyond.json()).toMatchObject({ statusCode: '416', error: 'InvalidRange', code: 'invalid_range' });

    const cached = await fetch(url, { headers: { ...auth, 'if-none-match': etag } });
    expect(cached.status).toBe(304);
    expect(await cached.text()).toBe('');
    expect((await fetch(url, { headers: { ...auth, 'if-none-match': '"stale"' } })).status).toBe(200);

    const head = await fetch(url, { method: 'HEAD', headers: auth });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('16');
  });

  it('serves every attachment as a download, with nosniff, whatever its declared type', async () => {
    const fi = await user('st-fi');
    const path = `${fi.userId}/page.html`;
    await fi.storage.from('attachments').upload(path, Buffer.from('<script>alert(1)</script>'), { contentType: 'text/html' });
    const res = await fetch(`${baseUrl}/storage/v1/object/attachments/${path}`, { headers: { authorization: `Bearer ${fi.accessToken}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="page.html"/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toContain('sandbox');
  });
});

describe('caching of private objects (security review round 5)', () => {
  it('a private object asked to be public or shared-cached is served private only, by every door', async () => {
    const pat = await user('st-pat');
    const path = `${pat.userId}/secret.txt`;
    const put = await fetch(`${baseUrl}/storage/v1/object/attachments/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${pat.accessToken}`, 'content-type': 'text/plain', 'cache-control': 'public, s-maxage=600, max-age=60' },
      body: 'private words',
    });
    expect(put.status).toBe(200);
    const direct = await fetch(`${baseUrl}/storage/v1/object/attachments/${path}`, { headers: { authorization: `Bearer ${pat.accessToken}` } });
    expect(direct.headers.get('cache-control')).toBe('private, max-age=60');
    const signed = await pat.storage.from('attachments').createSignedUrl(path, 60);
    const viaLink = await fetch(signed.data!.signedUrl);
    expect(viaLink.status).toBe(200);
    expect(viaLink.headers.get('cache-control')).toBe('private, max-age=60');
    const notModified = await fetch(signed.data!.signedUrl, { headers: { 'if-none-match': viaLink.headers.get('etag')! } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get('cache-control')).toBe('private, max-age=60');

    // A transformation of an image of a private image bucket, the same.
    const bucket = `private-images-${pat.userId.slice(0, 8)}`;
    await db()`select admin.storage_bucket_create(${bucket}, false, 'user', 5242880, array['image/*'], true)`;
    const image = `${pat.userId}/photo.png`;
    const imagePut = await fetch(`${baseUrl}/storage/v1/object/${bucket}/${image}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${pat.accessToken}`, 'content-type': 'image/png', 'cache-control': 'PUBLIC,s-maxage=86400,immutable' },
      body: new Uint8Array(await png(40, 30)),
    });
    expect(imagePut.status).toBe(200);
    const render = await fetch(`${baseUrl}/storage/v1/render/image/authenticated/${bucket}/${image}?width=16`, { headers: { authorization: `Bearer ${pat.accessToken}` } });
    expect(render.status).toBe(200);
    expect(render.headers.get('cache-control')).toBe('private, immutable');
  });
});

describe('public URLs and signed URLs', () => {
  it('getPublicUrl of a public bucket downloads without a credential; a private bucket has none', async () => {
    const gi = await user('st-gi');
    const avatars = gi.storage.from('avatars');
    const { png } = await import('../support/storage.ts');
    expect((await avatars.upload(`${gi.userId}/face.png`, await png(16, 16), { contentType: 'image/png' })).error).toBeNull();
    const { publicUrl } = avatars.getPublicUrl(`${gi.userId}/face.png`).data;
    expect(publicUrl).toBe(`${baseUrl}/storage/v1/object/public/avatars/${gi.userId}/face.png`);
    const res = await fetch(publicUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('max-age=3600');

    await gi.storage.from('attachments').upload(`${gi.userId}/secret.txt`, text('secret'));
    const privateUrl = gi.storage.from('attachments').getPublicUrl(`${gi.userId}/secret.txt`).data.publicUrl;
    const refused = await fetch(privateUrl);
    expect(refused.status).toBe(404);
    expect(await refused.json()).toMatchObject({ code: 'object_not_found' });
  });

  it('a signed URL downloads a private object without a credential; tampered or expired, it is refused', async () => {
    const hu = await user('st-hu');
    const files = hu.storage.from('attachments');
    await files.upload(`${hu.userId}/shared.pdf`, Buffer.from('%PDF-1.4 shared'), { contentType: 'application/pdf' });
    const signed = await files.createSignedUrl(`${hu.userId}/shared.pdf`, 60);
    expect(signed.error).toBeNull();
    expect(signed.data!.signedUrl).toMatch(new RegExp(`^${baseUrl}/storage/v1/object/sign/attachments/${hu.userId}/shared.pdf\\?token=`));
    const res = await fetch(signed.data!.signedUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('%PDF-1.4 shared');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment/);

    const url = new URL(signed.data!.signedUrl);
    const token = url.searchParams.get('token')!;
    const [header, payload, signature] = token.split('.');
    // Another path in the payload, the signature kept.
    const forged = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    forged.url = `attachments/${hu.userId}/other.pdf`;
    const forgedToken = `${header}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${signature}`;
    const tampered = await fetch(`${baseUrl}/storage/v1/object/sign/attachments/${hu.userId}/other.pdf?token=${forgedToken}`);
    expect(tampered.status).toBe(400);
    expect(await tampered.json()).toMatchObject({ statusCode: '400', error: 'InvalidSignature', code: 'invalid_signature' });
    const flipped = await fetch(`${baseUrl}/storage/v1/object/sign/attachments/${hu.userId}/shared.pdf?token=${token.slice(0, -2)}xx`);
    expect((await flipped.json()).code).toBe('invalid_signature');
    const elsewhere = await fetch(`${baseUrl}/storage/v1/object/sign/attachments/${hu.userId}/another.pdf?token=${token}`);
    expect((await elsewhere.json()).code).toBe('invalid_signature');

    const short = await files.createSignedUrl(`${hu.userId}/shared.pdf`, 1);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const expired = await fetch(short.data!.signedUrl);
    expect(expired.status).toBe(400);
    expect(await expired.json()).toMatchObject({ error: 'InvalidJWT', code: 'signature_expired' });

    const many = await files.createSignedUrls([`${hu.userId}/shared.pdf`, `${hu.userId}/missing.pdf`], 60);
    expect(many.error).toBeNull();
    expect(many.data![0]!.error).toBeNull();
    expect((await fetch(many.data![0]!.signedUrl!)).status).toBe(200);
    expect(many.data![1]).toMatchObject({ signedUrl: null, error: 'Either the object does not exist or you do not have access to it' });
  });

  it('a signed URL of a name with a space or a ? is a working URL, raw and through supabase-js (security review round 5)', async () => {
    const qu = await user('st-qu');
    const name = `${qu.userId}/what is this?v=2.txt`;
    const encoded = name.split('/').map(encodeURIComponent).join('/');
    const put = await fetch(`${baseUrl}/storage/v1/object/attachments/${encoded}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${qu.accessToken}`, 'content-type': 'text/plain' },
      body: 'the question',
    });
    expect(put.status).toBe(200);
    const raw = await api('POST', `/storage/v1/object/sign/attachments/${encoded}`, { token: qu.accessToken, body: { expiresIn: 60 } });
    expect(raw.status).toBe(200);
    expect(raw.body.signedURL).toMatch(new RegExp(`^/object/sign/attachments/${qu.userId}/what%20is%20this%3Fv=2\\.txt\\?token=[^?]+$`));
    const viaRaw = await fetch(`${baseUrl}/storage/v1${raw.body.signedURL}`);
    expect(viaRaw.status).toBe(200);
    expect(await viaRaw.text()).toBe('the question');
    // supabase-js encodes the URL it is given once more (encodeURI). (Its createSignedUrl puts the name in its
    // request's path unencoded, so it can sign a name with a space but not one with a `?`; createSignedUrls sends names in the body.)
    const many = await qu.storage.from('attachments').createSignedUrls([name], 60);
    expect(many.error).toBeNull();
    expect(await (await fetch(many.data![0]!.signedUrl!)).text()).toBe('the question');
    const spaced = `${qu.userId}/two words.txt`;
    expect((await qu.storage.from('attachments').upload(spaced, text('spaced'), { contentType: 'text/plain' })).error).toBeNull();
    const viaClient = await qu.storage.from('attachments').createSignedUrl(spaced, 60);
    expect(viaClient.error).toBeNull();
    expect(await (await fetch(viaClient.data!.signedUrl)).text()).toBe('spaced');
    // A signed upload URL of such a name, the same.
    const upload = await api('POST', `/storage/v1/object/upload/sign/attachments/${qu.userId}/${encodeURIComponent('drop here?.txt')}`, { token: qu.accessToken });
    expect(upload.status).toBe(200);
    expect(upload.body.url).toContain('/drop%20here%3F.txt?token=');
    const dropped = await fetch(`${baseUrl}/storage/v1${upload.body.url}`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'dropped' });
    expect(dropped.status).toBe(200);
  });

  it('a signed upload URL uploads as its signer, without a credential', async () => {
    const ivy = await user('st-ivy');
    const files = ivy.storage.from('attachments');
    const signed = await files.createSignedUploadUrl(`${ivy.userId}/dropped.txt`);
    expect(signed.error).toBeNull();
    const anonymous = storageClient(baseUrl).from('attachments');
    const up = await anonymous.uploadToSignedUrl(`${ivy.userId}/dropped.txt`, signed.data!.token, text('dropped in'));
    expect(up.error).toBeNull();
    expect(await (await files.download(`${ivy.userId}/dropped.txt`)).data!.text()).toBe('dropped in');
    const [row] = await db()`select owner_id from app.storage_objects where bucket_id = 'attachments' and name = ${`${ivy.userId}/dropped.txt`}`;
    expect(row!.owner_id).toBe(ivy.userId);
    // Not to another path.
    const other = await anonymous.uploadToSignedUrl(`${ivy.userId}/elsewhere.txt`, signed.data!.token, text('x'));
    expect(other.error).toMatchObject({ status: 400 });
    // Once: the path is taken now.
    const twice = await anonymous.uploadToSignedUrl(`${ivy.userId}/dropped.txt`, signed.data!.token, text('again'));
    expect(twice.error).toMatchObject({ status: 409 });
  });

  it('a signed upload URL uploads once, with or without upsert; a refused upload gives it back (security review round 5)', async () => {
    const kim = await user('st-kim');
    const put = (url: string, body: string | Buffer, type = 'text/html') =>
      fetch(`${baseUrl}/storage/v1${url}`, { method: 'PUT', headers: { 'content-type': type }, body: typeof body === 'string' ? body : new Uint8Array(body) });
    // Signed with x-upsert: true, then used three times with HTML bodies.
    const upsert = await api('POST', `/storage/v1/object/upload/sign/attachments/${kim.userId}/page.html`, {
      token: kim.accessToken,
      headers: { 'x-upsert': 'true' },
    });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await put(upsert.body.url, `<h1>${i}</h1>`));
    expect(answers.map((r) => r.status)).toEqual([200, 409, 409]);
    expect(await answers[1]!.json()).toMatchObject({ statusCode: '409', code: 'signed_url_used' });
    expect(await (await kim.storage.from('attachments').download(`${kim.userId}/page.html`)).data!.text()).toBe('<h1>0</h1>');

    // Without upsert: used, then the owner deletes the object; the token does not upload again.
    const once = await api('POST', `/storage/v1/object/upload/sign/attachments/${kim.userId}/once.txt`, { token: kim.accessToken });
    expect((await put(once.body.url, 'first', 'text/plain')).status).toBe(200);
    expect((await kim.storage.from('attachments').remove([`${kim.userId}/once.txt`])).error).toBeNull();
    const again = await put(once.body.url, 'second', 'text/plain');
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'signed_url_used' });
    expect((await kim.storage.from('attachments').exists(`${kim.userId}/once.txt`)).data).toBe(false);

    // Two at once: one object, one refusal.
    const race = await api('POST', `/storage/v1/object/upload/sign/attachments/${kim.userId}/race.txt`, { token: kim.accessToken, headers: { 'x-upsert': 'true' } });
    const both = await Promise.all([put(race.body.url, 'a', 'text/plain'), put(race.body.url, 'b', 'text/plain')]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);

    // A refused upload (not an image, in an image bucket) gives the token back; the next one uses it up.
    const avatar = await api('POST', `/storage/v1/object/upload/sign/avatars/${kim.userId}/me.png`, { token: kim.accessToken });
    const refused = await put(avatar.body.url, 'not an image', 'image/png');
    expect(refused.status).toBe(415);
    expect((await put(avatar.body.url, await png(8, 8), 'image/png')).status).toBe(200);
    expect((await put(avatar.body.url, await png(8, 8), 'image/png')).status).toBe(409);
  });

  it('buckets are listed and described', async () => {
    const jo = await user('st-jo');
    const list = await jo.storage.listBuckets();
    expect(list.error).toBeNull();
    expect(list.data!.map((b) => b.id)).toEqual(expect.arrayContaining(['attachments', 'avatars', 'community-images', 'event-images']));
    const one = await jo.storage.getBucket('avatars');
    expect(one.data).toMatchObject({ id: 'avatars', public: true, file_size_limit: 5242880, allowed_mime_types: ['image/*'] });
    expect((await jo.storage.getBucket('nope')).error).toMatchObject({ status: 404 });
    const res = await api('GET', '/storage/v1/bucket/attachments', { token: jo.accessToken });
    expect(res.body).toMatchObject({ public: false, file_size_limit: 26214400 });
  });
});

describe('a body that cannot be read', () => {
  it('is answered in Supabase Storage\'s body on /storage/v1, as the document says', async () => {
    const ada = await user('st-badjson');
    for (const rawBody of ['{"prefix": ', '"just a string"']) {
      const res = await api('POST', '/storage/v1/object/list/attachments', { token: ada.accessToken, rawBody });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ statusCode: '400', error: expect.any(String), code: 'invalid_json', message: expect.any(String) });
    }
  });
});
