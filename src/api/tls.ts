// TLS on both ports (docs/security.md): the certificate and its key, and for mutual TLS the CA that client
// certificates must chain to, read from the files the settings name. The ports follow the files: the
// directories holding them are watched (src/config/file-watch.ts), a changed set is checked before use, and a
// set that fails the check is logged and refused, so new connections keep getting the last good certificate.
// Connections already open keep the certificate they were made with.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import { dirname } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { watchDirectories } from '../config/file-watch.js';
import type { ServiceConfig } from '../config/service-config.js';

/** Debounce of the reload: a certificate and its key are often written one after the other. */
const RELOAD_DEBOUNCE_MS = 250;

/** What the `listening` line reports: plaintext, TLS, or TLS that requires a client certificate. */
export type TlsMode = 'off' | 'on' | 'mutual';

interface TlsFiles {
  cert: string;
  key: string;
  /** '' without mutual TLS. */
  clientCa: string;
}

/** The files' bytes: what a secure context is made from. */
interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
}

type ContextListener = (context: SecureContextOptions) => void;

export class TlsCredentials {
  private readonly listeners = new Set<ContextListener>();
  /** The last set refused (its bytes, or the message of a failed read): the poll re-reads unchanged files, and
   *  one error line per bad set is enough. */
  private refused: TlsMaterial | string | undefined;
  private watcher: { close(): void } | undefined;

  private constructor(
    private readonly files: TlsFiles,
    private material: TlsMaterial,
    private readonly log: Logger,
  ) {}

  /** Reads and checks the files the settings name (a bad set fails the start), then follows them; undefined
   *  when TLS is off. */
  static open(config: ServiceConfig, log: Logger): TlsCredentials | undefined {
    if (config.tls_cert_file === '') return undefined;
    const files = { cert: config.tls_cert_file, key: config.tls_key_file, clientCa: config.tls_client_ca_file };
    const material = readMaterial(files);
    const leaf = check(material, files);
    const tls = new TlsCredentials(files, material, log);
    tls.logCertificate(leaf, 'TLS certificate loaded');
    tls.watcher = watchDirectories(
      [files.cert, files.key, files.clientCa].filter((f) => f !== '').map((f) => dirname(f)),
      RELOAD_DEBOUNCE_MS,
      () => tls.reload(),
    );
    return tls;
  }

  get mode(): TlsMode {
    return this.files.clientCa === '' ? 'on' : 'mutual';
  }

  /** Options of the HTTPS server: the current certificate; with mutual TLS a handshake without a client
   *  certificate that chains to the CA fails. */
  httpsOptions(): HttpsServerOptions {
    const mutual = this.mode === 'mutual';
    return { ...this.context(), requestCert: mutual, rejectUnauthorized: mutual };
  }

  /** Called with each new good set; for `server.setSecureContext`. */
  onChange(listener: ContextListener): void {
    this.listeners.add(listener);
  }

  /**
   * Credentials of the gRPC port. grpc-js sets a new secure context on its server whenever a certificate
   * provider reports new certificates; this one reports each good set.
   */
  grpcCredentials(): ServerCredentials {
    const identity = new Set<experimental.IdentityCertificateUpdateListener>();
    const ca = new Set<experimental.CaCertificateUpdateListener>();
    const provider: experimental.CertificateProvider = {
      // grpc-js adds its listener before the server's watcher: the current set must come on a later tick, as
      // its own FileWatcherCertificateProvider does, or the server never hears of it.
      addIdentityCertificateListener: (listener) => {
        identity.add(listener);
        process.nextTick(() => listener({ certificate: this.material.cert, privateKey: this.material.key }));
      },
      removeIdentityCertificateListener: (listener) => identity.delete(listener),
      addCaCertificateListener: (listener) => {
        ca.add(listener);
        process.nextTick(() => {
          if (this.material.ca) listener({ caCertificate: this.material.ca });
        });
      },
      removeCaCertificateListener: (listener) => ca.delete(listener),
    };
    this.onChange(() => {
      for (const listener of identity) listener({ certificate: this.material.cert, privateKey: this.material.key });
      if (this.material.ca) for (const listener of ca) listener({ caCertificate: this.material.ca });
    });
    // The identity provider comes first (the declaration of grpc-js 1.14 names its first two parameters the
    // other way round); a CA provider makes the server ask for a client certificate, and `true` requires one.
    const mutual = this.mode === 'mutual';
    return experimental.createCertificateProviderServerCredentials(provider, mutual ? provider : null, mutual);
  }

  close(): void {
    this.watcher?.close();
    this.listeners.clear();
  }

  private context(): SecureContextOptions {
    const { cert, key, ca } = this.material;
    return { cert, key, ...(ca ? { ca } : {}) };
  }

  private reload(): void {
    let read: TlsMaterial;
    try {
      read = readMaterial(this.files);
    } catch (err) {
      this.refuse((err as Error).message, (err as Error).message);
      return;
    }
    if (sameMaterial(read, this.material)) {
      this.refused = undefined;
      return;
    }
    if (typeof this.refused === 'object' && sameMaterial(read, this.refused)) return;
    let leaf: X509Certificate;
    try {
      leaf = check(read, this.files);
    } catch (err) {
      this.refuse(read, (err as Error).message);
      return;
    }
    this.material = read;
    this.refused = undefined;
    const context = this.context();
    for (const listener of this.listeners) listener(context);
    this.logCertificate(leaf, 'TLS certificate reloaded');
  }

  private refuse(what: TlsMaterial | string, message: string): void {
    if (what === this.refused) return;
    this.refused = what;
    this.log.error({ certFile: this.files.cert }, `TLS files refused; the last good certificate stays in force: ${message}`);
  }

  private logCertificate(leaf: X509Certificate, msg: string): void {
    const fields = { certFile: this.files.cert, subject: leaf.subject, serial: leaf.serialNumber, validTo: leaf.validTo, mode: this.mode };
    if (Date.parse(leaf.validTo) < Date.now()) this.log.warn(fields, `${msg}, but it has expired: clients will refuse it`);
    else this.log.info(fields, msg);
  }
}

/** Reads the three files; a message naming the file and its setting if one cannot be read. */
function readMaterial(files: TlsFiles): TlsMaterial {
  const read = (file: string, setting: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Error(`${file} (${setting}): ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
    }
  };
  const cert = read(files.cert, 'tls_cert_file');
  const key = read(files.key, 'tls_key_file');
  return files.clientCa === '' ? { cert, key } : { cert, key, ca: read(files.clientCa, 'tls_client_ca_file') };
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * Checks a set before it is used, with a message naming the file at fault: the certificate and the key parse,
 * the key is the certificate's, and the CA file holds certificates (Node would take a CA file without any
 * and then refuse every client). Answers the leaf certificate.
 */
function check(material: TlsMaterial, files: TlsFiles): X509Certificate {
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(material.cert);
  } catch (err) {
    throw new Error(`${files.cert} (tls_cert_file): not a PEM certificate (${(err as Error).message})`);
  }
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(material.key);
  } catch (err) {
    throw new Error(`${files.key} (tls_key_file): not an unencrypted PEM private key (${(err as Error).message})`);
  }
  if (!leaf.checkPrivateKey(key)) {
    throw new Error(`${files.key} (tls_key_file) is not the key of the certificate in ${files.cert} (tls_cert_file)`);
  }
  if (material.ca) {
    const blocks = material.ca.toString('latin1').match(PEM_CERTIFICATE) ?? [];
    try {
      if (blocks.length === 0) throw new Error('no PEM certificate in it');
      for (const block of blocks) new X509Certificate(block);
    } catch (err) {
      throw new Error(`${files.clientCa} (tls_client_ca_file): not PEM CA certificates (${(err as Error).message})`);
    }
  }
  try {
    createSecureContext({ cert: material.cert, key: material.key, ...(material.ca ? { ca: material.ca } : {}) });
  } catch (err) {
    throw new Error(`${files.cert} (tls_cert_file): unusable with its key (${(err as Error).message})`);
  }
  return leaf;
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  return (
    a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca === undefined ? b.ca === undefined : b.ca !== undefined && a.ca.equals(b.ca))
  );
}
