import { expect } from 'chai';
import { BlockedAddressError, ConfigError } from '../../lib/errors.ts';
import { createAddressGuard } from '../../lib/delivery/address-guard.ts';

describe('createAddressGuard', () => {
  context('without allowNetworks', () => {
    const guard = createAddressGuard([]);

    const refused: Array<[string, string]> = [
      ['127.0.0.1', 'IPv4 loopback'],
      ['127.255.0.9', 'the rest of 127/8'],
      ['10.0.0.1', 'private 10/8'],
      ['172.16.5.4', 'private 172.16/12'],
      ['172.31.255.255', 'the end of 172.16/12'],
      ['192.168.1.1', 'private 192.168/16'],
      ['169.254.169.254', 'the cloud metadata service (link-local)'],
      ['169.254.1.1', 'link-local'],
      ['0.0.0.0', 'this network, 0/8'],
      ['0.1.2.3', '0/8'],
      ['100.64.0.1', 'CGNAT 100.64/10'],
      ['224.0.0.1', 'multicast'],
      ['255.255.255.255', 'broadcast'],
      ['240.0.0.1', 'reserved'],
      ['192.0.2.10', 'documentation (reserved)'],
      ['::1', 'IPv6 loopback'],
      ['::', 'IPv6 unspecified'],
      ['fc00::1', 'unique local fc00::/7'],
      ['fd12:3456::1', 'unique local fd00::/8'],
      ['fe80::1', 'link-local fe80::/10'],
      ['ff02::1', 'IPv6 multicast'],
      ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
      ['::ffff:7f00:1', 'IPv4-mapped loopback in hex'],
      ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
      ['::ffff:10.0.0.1', 'IPv4-mapped private'],
      ['64:ff9b::a9fe:a9fe', 'NAT64 of the metadata address'],
      ['64:ff9b::7f00:1', 'NAT64 of loopback'],
      ['2002:7f00:1::1', '6to4 (not plain unicast)'],
      ['::127.0.0.1', 'IPv4-compatible loopback (not IPv4-mapped, whatever ipaddr.js says)'],
      ['::7f00:1', 'IPv4-compatible loopback in hex'],
      ['::169.254.169.254', 'IPv4-compatible metadata'],
      ['::8.8.8.8', 'IPv4-compatible public (deprecated form, refused whole)'],
      ['::ffff:0:127.0.0.1', 'IPv4-translated loopback'],
      ['64:ff9b:1::a9fe:a9fe', 'local-use NAT64 (refused whole)'],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo (refused whole)'],
      ['not-an-ip', 'something that is not an address'],
      ['0x7f.1', 'a non-canonical IPv4 form'],
      ['', 'the empty string'],
    ];
    for (const [ip, what] of refused) {
      it(`refuses ${what} (${ip || '""'})`, () => {
        expect(guard.isAllowed(ip)).to.equal(false);
        expect(() => guard.check(ip, 'hooks.example')).to.throw(BlockedAddressError);
      });
    }

    const allowed: Array<[string, string]> = [
      ['93.184.216.34', 'public IPv4'],
      ['8.8.8.8', 'public IPv4'],
      ['172.32.0.1', 'just outside 172.16/12'],
      ['100.128.0.1', 'just outside 100.64/10'],
      ['2606:4700:4700::1111', 'public IPv6'],
      ['::ffff:8.8.8.8', 'IPv4-mapped public'],
      ['64:ff9b::808:808', 'NAT64 of a public address'],
    ];
    for (const [ip, what] of allowed) {
      it(`allows ${what} (${ip})`, () => {
        expect(guard.isAllowed(ip)).to.equal(true);
        expect(() => guard.check(ip, 'hooks.example')).not.to.throw();
      });
    }

    it('names the address and host in the error, with the way out', () => {
      try {
        guard.check('169.254.169.254', 'metadata.internal');
        expect.fail('expected a BlockedAddressError');
      } catch (error) {
        expect(error).to.be.instanceOf(BlockedAddressError);
        const blocked = error as BlockedAddressError;
        expect(blocked.code).to.equal('HERALD_BLOCKED_ADDRESS');
        expect(blocked.address).to.equal('169.254.169.254');
        expect(blocked.message).to.contain('metadata.internal').and.contain('allowNetworks');
      }
    });
  });

  context('with allowNetworks', () => {
    const guard = createAddressGuard(['127.0.0.0/8', '::1/128', '10.1.0.0/16']);

    it('opens exactly the listed ranges', () => {
      expect(guard.isAllowed('127.0.0.1')).to.equal(true);
      expect(guard.isAllowed('127.9.9.9')).to.equal(true);
      expect(guard.isAllowed('::1')).to.equal(true);
      expect(guard.isAllowed('10.1.200.3')).to.equal(true);
      expect(guard.isAllowed('10.2.0.1')).to.equal(false);
      expect(guard.isAllowed('169.254.169.254')).to.equal(false);
      expect(guard.isAllowed('fe80::1')).to.equal(false);
    });

    it('opens the IPv4-mapped form of an allowed IPv4 range', () => {
      expect(guard.isAllowed('::ffff:127.0.0.1')).to.equal(true);
    });

    it('does not open the IPv4-compatible, translated or NAT64 forms of an allowed IPv4 range', () => {
      for (const ip of ['::127.0.0.1', '::7f00:1', '::ffff:0:127.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b:1::127.0.0.1']) {
        expect(guard.isAllowed(ip), ip).to.equal(false);
      }
    });

    it('keeps public addresses allowed', () => {
      expect(guard.isAllowed('8.8.8.8')).to.equal(true);
    });
  });

  context('when an entry is not a CIDR', () => {
    for (const value of ['127.0.0.1', '127.0.0.0/33', '::1/129', 'localhost/8', '', 42]) {
      it(`throws a ConfigError naming allowNetworks for ${JSON.stringify(value)}`, () => {
        expect(() => createAddressGuard([value as string])).to.throw(
          ConfigError,
          `config allowNetworks=${JSON.stringify(value)}: must be a CIDR such as 127.0.0.0/8 or ::1/128`,
        );
      });
    }
  });
});
