import { expect } from 'chai';
import { ErrorCode } from '../../../lib/errors.ts';
import { isMongoSetting, parseMongoUri, redactMongoUri } from '../../../lib/store/mongo/mongo-uri.ts';
import { redactUri } from '../../../lib/store/open-store.ts';

describe('MongoDB connection strings', () => {
  describe('parseMongoUri', () => {
    it('reads hosts, database and replica set', () => {
      expect(parseMongoUri('mongodb://a:27017,b:27018/orders?replicaSet=rs0&w=majority')).to.deep.equal({
        scheme: 'mongodb',
        hosts: ['a:27017', 'b:27018'],
        dbName: 'orders',
        replicaSet: 'rs0',
      });
      expect(parseMongoUri('mongodb+srv://u:p@cluster0.example.net/?retryWrites=true')).to.deep.equal({
        scheme: 'mongodb+srv',
        hosts: ['cluster0.example.net'],
        dbName: 'herald',
        replicaSet: undefined,
      });
      expect(parseMongoUri('mongodb://127.0.0.1').dbName).to.equal('herald');
    });

    it('refuses what is not a MongoDB URI, naming the rule and hiding the password', () => {
      for (const uri of ['http://h/db', 'mongodb:/h/db', 'mongodb://', 'mongodb:///db', 'mongodb://h/a.b', 'mongodb+srv://a,b/db', 'mongodb://u:s3cret@/db']) {
        let thrown: unknown;
        try {
          parseMongoUri(uri);
        } catch (error) {
          thrown = error;
        }
        expect(thrown, uri).to.have.property('code', ErrorCode.INVALID_INPUT);
        expect((thrown as Error).message, uri).to.match(/^uri: /).and.not.include('s3cret');
      }
    });

    it('tells MongoDB settings from others', () => {
      expect(['mongodb://h', 'mongodb+srv://h', 'mongodb-memory-server', 'sqlite:x.db', 'mongo://h'].map(isMongoSetting)).to.deep.equal([
        true, true, true, false, false,
      ]);
    });
  });

  describe('redactMongoUri', () => {
    it('hides passwords, even unescaped ones, and secret options', () => {
      expect(redactMongoUri('mongodb://herald:s3cret@db1,db2/h?replicaSet=rs0')).to.equal('mongodb://herald:***@db1,db2/h?replicaSet=rs0');
      expect(redactMongoUri('mongodb://u:pa/ss@word@db/h')).to.equal('mongodb://u:***@db/h');
      expect(redactMongoUri('mongodb://db/h?tlsCertificateKeyFilePassword=x&authMechanismProperties=AWS_SESSION_TOKEN:y')).to.equal(
        'mongodb://db/h?tlsCertificateKeyFilePassword=***&authMechanismProperties=***',
      );
      expect(redactMongoUri('mongodb://db:27017/h?replicaSet=rs0')).to.equal('mongodb://db:27017/h?replicaSet=rs0');
      expect(redactUri('sqlite:./data/herald.db')).to.equal('sqlite:./data/herald.db');
      expect(redactUri('mongodb+srv://u:p@c.example.net/')).to.equal('mongodb+srv://u:***@c.example.net/');
    });
  });
});
