/**
 * The SQLite file's layout versions: numbered migrations applied once, in
 * order, with the version they bring; a file from a newer Herald refused.
 */
import { expect } from 'chai';
import Database from 'better-sqlite3';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { ensureSchema, migrate, SCHEMA_VERSION, type SqliteMigration } from '../../lib/store/sqlite/schema.ts';

const version = (db: Database.Database): string => db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).pluck().get() as string;

describe('SQLite schema versions', () => {
  let db: Database.Database;

  beforeEach(() => {
    db = new Database(':memory:');
  });

  afterEach(() => {
    db.close();
  });

  it('records the version this code brings a new file to', () => {
    ensureSchema(db);
    expect(version(db)).to.equal(String(SCHEMA_VERSION));
  });

  it('applies the migrations the file lacks, in order, once, and records the last', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '1' WHERE key = 'schema_version'`).run();
    const migrations: SqliteMigration[] = [
      { version: 2, what: 'a column', sql: `ALTER TABLE endpoints ADD COLUMN spec_note TEXT` },
      { version: 3, what: 'a table', sql: `CREATE TABLE spec_extra (id TEXT PRIMARY KEY)` },
    ];
    db.transaction(() => migrate(db, migrations)).immediate();
    expect(version(db)).to.equal('3');
    const columns = db.prepare(`SELECT name FROM pragma_table_info('endpoints')`).pluck().all();
    expect(columns).to.include('spec_note');
    // Run again: nothing to do (an ALTER run twice would throw).
    db.transaction(() => migrate(db, migrations)).immediate();
    expect(version(db)).to.equal('3');
  });

  it('refuses a file migrated by a newer Herald with HERALD_STORE naming both versions, changing nothing', () => {
    ensureSchema(db);
    db.prepare(`UPDATE meta SET value = '99' WHERE key = 'schema_version'`).run();
    let thrown: unknown;
    try {
      db.transaction(() => migrate(db, [{ version: 2, what: 'a column', sql: `ALTER TABLE endpoints ADD COLUMN spec_note TEXT` }])).immediate();
    } catch (error) {
      thrown = error;
    }
    expect(isHeraldError(thrown) && thrown.code).to.equal(ErrorCode.STORE);
    expect((thrown as Error).message).to.include('version 99').and.include('(2)');
    expect(version(db)).to.equal('99');
  });
});
