import { expect } from 'chai';
import { MongoAPIError, MongoBulkWriteError, MongoNetworkError, MongoServerError } from 'mongodb';
import {
  isChangeStreamHistoryLost,
  isDuplicateKeyError,
  isResumableChangeStreamError,
  onlyDuplicateKeys,
  serverErrorCode,
} from '../../../lib/store/mongo/mongo-errors.ts';

const server = (code: number, errorLabels: string[] = []) => new MongoServerError({ message: `error ${code}`, code, errorLabels });

describe('MongoDB error predicates', () => {
  describe('isResumableChangeStreamError', () => {
    it('is true for network errors, labelled errors and CursorNotFound', () => {
      expect(isResumableChangeStreamError(new MongoNetworkError('reset'))).to.equal(true);
      expect(isResumableChangeStreamError(server(11602, ['ResumableChangeStreamError']))).to.equal(true);
      expect(isResumableChangeStreamError(server(43))).to.equal(true);
    });

    it('uses the legacy code list only for unlabelled (pre-4.4) errors', () => {
      expect(isResumableChangeStreamError(server(189))).to.equal(true);
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

  it('recognises lost history by code (286, and 280 on 4.0), never by message', () => {
    expect(isChangeStreamHistoryLost(server(286))).to.equal(true);
    expect(isChangeStreamHistoryLost(server(280))).to.equal(true);
    expect(isChangeStreamHistoryLost(new Error('ChangeStreamHistoryLost'))).to.equal(false);
    expect(isChangeStreamHistoryLost({ code: 286 })).to.equal(false);
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
