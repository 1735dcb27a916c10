// Foundation routes: what one authenticated request costs, and login (which
// is dominated, on purpose, by bcrypt).
import type { Bench } from './harness.ts';

const bench: Bench = {
  name: 'foundation',
  description: 'auth, profile and hats through the gateway',
  async run(ctx) {
    const { token, email } = await ctx.user();
    await ctx.call('POST', '/api/mobile/hats', { token, body: { hat: { name: 'Work', hat_type: 'professional' } } });
    return [
      await ctx.measure('GET /api/mobile/profile', 300, () => ctx.call('GET', '/api/mobile/profile', { token })),
      await ctx.measure('GET /api/mobile/hats', 300, () => ctx.call('GET', '/api/mobile/hats', { token })),
      await ctx.measure('POST /api/auth/login (bcrypt cost 10)', 30, () =>
        ctx.call('POST', '/api/auth/login', { body: { email, password: 'bench-password' } }),
      ),
      await ctx.measure('POST /api/auth/verify', 300, () => ctx.call('POST', '/api/auth/verify', { body: { token } })),
    ];
  },
};
export default bench;
