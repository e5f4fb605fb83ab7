/**
 * A process that takes SQLite's write lock on Herald's file and holds it:
 *   tsx scripts/chaos/lock-holder.ts <db path> <hold ms>
 * Opens the file with better-sqlite3 (waiting up to 30 s for the lock), runs
 * `BEGIN IMMEDIATE`, prints `locked`, holds it for `hold ms`, rolls back,
 * prints `released` and exits. Killing it releases the lock too.
 */
import Database from 'better-sqlite3';

const [path, holdText] = process.argv.slice(2);
if (path === undefined || holdText === undefined) {
  process.stderr.write('usage: lock-holder.ts <db path> <hold ms>\n');
  process.exit(2);
}
const db = new Database(path, { timeout: 30_000 });
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\n');
setTimeout(() => {
  db.exec('ROLLBACK');
  db.close();
  process.stdout.write('released\n');
  process.exit(0);
}, Number(holdText));
