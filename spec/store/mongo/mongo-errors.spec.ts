import { expect } from 'chai';
import { MongoAPIError, MongoBulkWriteError, MongoCompatibilityError, MongoNetworkError, MongoServerError, MongoServerSelectionError } from 'mongodb';
import {
  isChangeStreamHistoryLost,
  isDuplicateKeyError,
  isIncompatibleServerError,
  isResumableChangeStreamError,
  onlyDuplicateKeys,
  serverErrorCode,
} from '../../../lib/store/mongo/mongo-errors.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';

const server = (code: number, errorLabels: string[] = []) => new MongoServerError({ message: `error ${code}`, code, errorLabels });

describe('MongoDB error predicates', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  describe('isResumableChangeStreamError', () => {
    it('is true for network errors, labelled errors and CursorNotFound', () => {
      expect(isResumableChangeStreamError(new MongoNetworkError('reset'))).to.equal(true);
      expect(isResumableChangeStreamError(server(11602, ['ResumableChangeStreamError']))).to.equal(true);
      expect(isResumableChangeStreamError(server(43))).to.equal(true);
    });

    it('trusts the label alone for server errors: every supported server (4.4+) labels resumable ones', () => {
      expect(isResumableChangeStreamError(server(189))).to.equal(false);
      expect(isResumableChangeStreamError(server(189, ['ResumableChangeStreamError']))).to.equal(true);
      expect(isResumableChangeStreamError(server(189, ['TransientTransactionError']))).to.equal(false);
    });

    it('is false for lost history, other server errors, a closed stream and non-driver errors', () => {
      expect(isResumableChangeStreamError(server(286))).to.equal(false);
      expect(isResumableChangeStreamError(server(286, ['ResumableChangeStreamError']))).to.equal(false);
      expect(isResumableChangeStreamError(server(2))).to.equal(false);
      expect(isResumableChangeStreamError(new MongoAPIError('ChangeStream is closed'))).to.equal(false);
      expect(isResumableChangeStreamError(new Error('ResumableChangeStreamError'))).to.equal(false);
      expect(isResumableChangeStreamError(undefined)).to.equal(false);
    });
  });

  it('recognises lost history by code 286, never by message (280 meant it only on 4.0, which Herald no longer supports)', () => {
    expect(isChangeStreamHistoryLost(server(286))).to.equal(true);
    expect(isChangeStreamHistoryLost(server(280))).to.equal(false);
    expect(isChangeStreamHistoryLost(new Error('ChangeStreamHistoryLost'))).to.equal(false);
    expect(isChangeStreamHistoryLost({ code: 286 })).to.equal(false);
  });

  it('recognises the driver refusing a server too old for it, directly or behind a server-selection timeout', () => {
    const refused = new MongoCompatibilityError('Server at db1:27017 reports maximum wire version 8, but this version of the Node.js Driver requires at least 9 (MongoDB 4.4)');
    expect(isIncompatibleServerError(refused)).to.equal(true);
    // How client.connect() reports it: the selection timed out, the monitor's failure kept in the topology it saw.
    type Topology = ConstructorParameters<typeof MongoServerSelectionError>[1];
    const topology = (error: Error | null) => ({ servers: new Map([['db1:27017', { error }]]) }) as unknown as Topology;
    expect(isIncompatibleServerError(new MongoServerSelectionError('Server selection timed out', topology(refused)))).to.equal(true);
    expect(isIncompatibleServerError(new MongoServerSelectionError('Server selection timed out', topology(new MongoNetworkError('refused'))))).to.equal(false);
    expect(isIncompatibleServerError(new MongoServerSelectionError('Server selection timed out', topology(null)))).to.equal(false);
    expect(isIncompatibleServerError(new Error('requires at least 9 (MongoDB 4.4)'))).to.equal(false);
  });

  it('recognises duplicate keys, alone or as the only failures of a bulk write', () => {
    expect(isDuplicateKeyError(server(11000))).to.equal(true);
    expect(serverErrorCode(server(11000))).to.equal(11000);
    expect(serverErrorCode(new Error('x'))).to.equal(undefined);
    // The driver builds these results itself; a stand-in with the two methods the predicate reads.
    const bulk = (codes: number[], writeConcernError?: object) =>
      new MongoBulkWriteError({ message: 'bulk', code: codes[0] ?? 0 }, {
        getWriteErrors: () => codes.map((code) => ({ code })),
        getWriteConcernError: () => writeConcernError,
      } as unknown as ConstructorParameters<typeof MongoBulkWriteError>[1]);
    expect(onlyDuplicateKeys(bulk([11000, 11000]))).to.equal(true);
    expect(onlyDuplicateKeys(bulk([11000, 2]))).to.equal(false);
    expect(onlyDuplicateKeys(bulk([11000], { code: 64 }))).to.equal(false);
    expect(onlyDuplicateKeys(bulk([]))).to.equal(false);
    expect(onlyDuplicateKeys(server(11000))).to.equal(true);
    expect(onlyDuplicateKeys(new Error('x'))).to.equal(false);
  });
});
