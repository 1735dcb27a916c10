// The answer shapes both front doors give: the REST routes (which put them in
// the OpenAPI document) and the MCP tools (whose outputSchema they are). A
// shape both answer is described once, here; a shape only one door gives
// lives with that door (gateway/routes/*.ts, mcp-server/tools.ts).
import { z } from 'zod';

/** A uuid in an answer (each use describes what it names). */
export const Id = z.guid().meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' });
/** A timestamp in an answer: ISO 8601, UTC, milliseconds (app.iso). */
export const DateTime = z.iso.datetime({ offset: true }).meta({ example: '2026-05-14T18:30:00.000Z' });

/** The fields every community payload starts with (app.community_json). */
export const CommunityBase = z.object({
  id: Id.describe("The community's id."),
  name: z.string().describe("The community's name.").meta({ example: 'Berlin Climbers' }),
  member_count: z.number().int().describe('How many members it has.').meta({ example: 128 }),
  created_at: DateTime.describe('When it was created.'),
  updated_at: DateTime.describe('When it last changed.'),
  description: z.string().nullable().describe('What it is about, or null.').meta({ example: 'Bouldering evenings and weekend trips around Berlin.' }),
  tags: z.array(z.string()).describe('Its tags (search looks at them too).').meta({ example: ['climbing', 'outdoors'] }),
  image_url: z
    .url()
    .nullable()
    .describe('The public URL of its image (an object of the `community-images` bucket, docs/storage.md), or null.')
    .meta({ example: 'https://community.example.com/storage/v1/object/public/community-images/0b6f2c1e-8d4a-4f3b-9c2e-7a1d5e9f3b20/logo.png' }),
});

/** A manager of a community, as community payloads list them. */
export const CommunityManager = z.object({
  id: Id.describe("The manager's node id."),
  name: z
    .string()
    .nullable()
    .describe("The manager's name, or null when it is not shown (a name made from an e-mail address).")
    .meta({ example: 'Grace Hopper' }),
});

/** Whether an event is going on now, is over, or is still to come (private.event_status). */
export const EventStatus = z.enum(['ongoing', 'past', 'upcoming']);

const PlatformUrl = (name: string) =>
  z.string().nullable().describe(`The event's page on ${name}, or null.`).meta({ example: `https://${name.replace(' ', '-')}.example.com/events/4711` });

/** Event (private.event_json); can_sync and external_platforms for managers only. */
export const Event = z
  .object({
    id: Id.describe("The event's id."),
    title: z.string().describe('Its title.').meta({ example: 'Bouldering night' }),
    date: DateTime.describe('When it starts.'),
    community_node_id: Id.describe("Its community's node id."),
    shortlink: z.string().length(8).describe('Its short code, as in /e/{shortlink} and /l/event/{shortlink}.').meta({ example: 'k3Xb9QzA' }),
    deeplink_path: z.string().describe('The path of its deep link (opens the app, else the web check-in).').meta({ example: '/l/event/k3Xb9QzA' }),
    deeplink_url: z.url().describe('Its deep link, in full.').meta({ example: 'https://community.example.com/l/event/k3Xb9QzA' }),
    public_url: z.string().describe('The path of its public page.').meta({ example: '/e/k3Xb9QzA' }),
    public_full_url: z.url().describe('Its public page, in full.').meta({ example: 'https://community.example.com/e/k3Xb9QzA' }),
    description: z.string().nullable().describe('What it is, or null.').meta({ example: 'Open session for all levels; shoes can be rented.' }),
    end_time: DateTime.nullable().describe('When it ends, or null (then it ends 2 hours after `date`).'),
    event_url: z.string().nullable().describe('Its website, or null.').meta({ example: 'https://climbers.example.org/nights/42' }),
    image_path: z
      .string()
      .nullable()
      .describe("Its image, or null: the path of an object of the `event-images` bucket (docs/storage.md), or an external URL a platform gave.")
      .meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
    image_url: z
      .string()
      .nullable()
      .describe('Its image as a URL, or null: the public URL of the stored object, or the external URL.')
      .meta({ example: 'https://community.example.com/storage/v1/object/public/event-images/9a3e7c2b-1f4d-4e8a-b6c5-2d7f0e1a3b49/poster.jpg' }),
    location: z.string().nullable().describe('Where it takes place, or null.').meta({ example: 'Boulderhalle Nord, Berlin' }),
    node_id: Id.describe("The event's node id (check-in links name it)."),
    platform_a_url: PlatformUrl('platform a'),
    platform_b_url: PlatformUrl('platform b'),
    platform_c_url: PlatformUrl('platform c'),
    timezone: z
      .string()
      .describe(
        "Its IANA time zone (the platform's, else its venue's, else its community's, else the service default): where its local time is told. `date` and `end_time` stay instants in UTC.",
      )
      .meta({ example: 'Europe/Berlin' }),
    can_sync: z.literal(true).optional().describe("Present (true) when the caller manages the event's community: they may sync it with external platforms."),
    external_platforms: z
      .array(z.enum(['platform_a', 'platform_b', 'platform_c']))
      .optional()
      .describe("For managers of the event's community: the external platforms that list it.")
      .meta({ example: ['platform_a'] }),
  })
  .meta({
    id: 'Event',
    description: "An event of one of the caller's communities.",
    example: {
      id: '0b7e5d1c-8f2a-4c3e-9d6b-1a2f3e4d5c6b',
      title: 'Bouldering night',
      date: '2026-06-05T16:00:00.000Z',
      community_node_id: '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f',
      shortlink: 'k3Xb9QzA',
      deeplink_path: '/l/event/k3Xb9QzA',
      deeplink_url: 'https://community.example.com/l/event/k3Xb9QzA',
      public_url: '/e/k3Xb9QzA',
      public_full_url: 'https://community.example.com/e/k3Xb9QzA',
      description: 'Open session for all levels; shoes can be rented.',
      end_time: '2026-06-05T20:00:00.000Z',
      event_url: 'https://climbers.example.org/nights/42',
      image_path: null,
      image_url: null,
      location: 'Boulderhalle Nord, Berlin',
      node_id: '4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8',
      platform_a_url: 'https://platform-a.example.com/events/evt-4711',
      platform_b_url: null,
      platform_c_url: null,
      timezone: 'Europe/Berlin',
    },
  });
