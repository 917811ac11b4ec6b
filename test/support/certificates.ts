// Throwaway certificates for the TLS tests, made with the openssl CLI: a CA, server certificates for
// 127.0.0.1 and localhost, and client certificates, P-256 keys (fast to make), valid for a day.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Issued {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
  /** Upper-case hex, as `X509Certificate.serialNumber` and `getPeerCertificate().serialNumber` write it. */
  serial: string;
}

const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });

/** A CA in `dir`; `issue` signs certificates with it into the same directory. */
export class TestAuthority {
  readonly certFile: string;
  private readonly keyFile: string;

  constructor(
    private readonly dir: string,
    readonly name: string,
  ) {
    this.certFile = join(dir, `${name}.pem`);
    this.keyFile = join(dir, `${name}.key`);
    openssl([
      'req',
      '-x509',
      ...KEY_ARGS,
      '-keyout',
      this.keyFile,
      '-out',
      this.certFile,
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  }

  get cert(): Buffer {
    return readFileSync(this.certFile);
  }

  /** A certificate for `commonName`: a server one names 127.0.0.1 and localhost. */
  issue(commonName: string, usage: 'server' | 'client'): Issued {
    const base = join(this.dir, commonName);
    const [keyFile, csrFile, certFile, extFile] = ['key', 'csr', 'pem', 'ext'].map((ext) => `${base}.${ext}`) as [
      string,
      string,
      string,
      string,
    ];
    openssl(['req', ...KEY_ARGS, '-keyout', keyFile, '-out', csrFile, '-subj', `/CN=${commonName}`]);
    writeFileSync(
      extFile,
      usage === 'server' ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' : 'extendedKeyUsage=clientAuth\n',
    );
    const serial = randomBytes(8).toString('hex').toUpperCase().replace(/^0/, '1');
    openssl([
      'x509',
      '-req',
      '-in',
      csrFile,
      '-CA',
      this.certFile,
      '-CAkey',
      this.keyFile,
      '-set_serial',
      `0x${serial}`,
      '-days',
      '1',
      '-extfile',
      extFile,
      '-out',
      certFile,
    ]);
    return { certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile), serial };
  }
}
