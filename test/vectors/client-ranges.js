// Which clients an address range holds, under the one rule that a token's allowedClients
// (the core's `admit`) and --trusted-proxies (trustedProxies in
// host/http/client-address.ts) both follow: an IPv4-mapped address is its IPv4 address,
// held by ranges written as IPv4 or inside ::ffff:0:0/96 (a prefix of 96 bits or more);
// no other IPv6 range holds an IPv4 client, not even ::/0. Addresses are written as
// clientAddress writes them (dotted IPv4, RFC 5952 IPv6), ranges in canonical form (no bit
// set past the prefix), as allowedClients takes them.
//
// test/unit/limits.test.ts runs every case through both; generate.js writes them into the
// core vectors, so that every host of the core runs them too.

/** @type {readonly { range: string, holds: readonly string[], not: readonly string[] }[]} */
export const CLIENT_RANGES = [
  { range: '::/0', holds: ['2001:db8::1', '::1', '::'], not: ['192.0.2.7', '0.0.0.0', '255.255.255.255'] },
  { range: '::/8', holds: ['::1', '::a01:203', 'ff::1'], not: ['10.1.2.3', '127.0.0.1'] },
  { range: '::/64', holds: ['::1', '::ffff:0:1:2'], not: ['127.0.0.1', '192.0.2.7'] },
  { range: '::/80', holds: ['::1', '::fffe:a01:203'], not: ['10.1.2.3'] },
  { range: '::fffe:0:0/95', holds: ['::fffe:a01:203', '::fffe:0:0'], not: ['10.1.2.3', '0.0.0.0', '255.255.255.255'] },
  { range: '::ffff:0:0/96', holds: ['10.1.2.3', '0.0.0.0', '255.255.255.255'], not: ['::1', '::fffe:a01:203', '::a01:203'] },
  { range: '::ffff:10.0.0.0/104', holds: ['10.1.2.3', '10.255.255.255'], not: ['11.0.0.0', '::a01:203', '2001:db8::1'] },
  { range: '0.0.0.0/0', holds: ['10.1.2.3', '192.0.2.7'], not: ['::1', '::', '2001:db8::1'] },
  { range: '10.0.0.0/8', holds: ['10.0.0.0', '10.1.2.3'], not: ['11.0.0.1', '9.255.255.255', '::a01:203', '::ffff:0:a01:203'] },
  { range: '192.0.2.7', holds: ['192.0.2.7'], not: ['192.0.2.8', '::c000:207'] },
  { range: '2001:db8::/32', holds: ['2001:db8::1', '2001:db8:ffff::'], not: ['2001:db9::1', '192.0.2.7'] },
  { range: '::1', holds: ['::1'], not: ['0.0.0.1', '::2'] },
];
