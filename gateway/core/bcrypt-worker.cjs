// The hashing threads' task (piscina loads it by its path in each thread):
// bcrypt with @node-rs/bcrypt. New hashes are named $2a$ (see passwords.ts).
const bcrypt = require('@node-rs/bcrypt');

module.exports = (job) =>
  job.op === 'verify' ? bcrypt.verifySync(job.password, job.hash) : bcrypt.hashSync(job.password, job.cost).replace(/^\$2[by]\$/, '$2a$');
