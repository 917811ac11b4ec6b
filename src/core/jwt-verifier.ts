// Signed JWT bearer tokens, for studios that mint tokens centrally: verified with `jose` against the keys of
// a local JWKS file (never fetched: the service reaches no identity provider), with the configured issuer and
// audience, scopes from a claim. A verification costs ~0.65 ms of CPU (ES256, measured on this project's
// 2-core machine), several times a CreateTicket, so a verified token is remembered until it expires.
import { createLocalJWKSet, importJWK, jwtVerify, type JWK, type JWTPayload } from 'jose';
import { SCOPES, type Scope } from '../config/access-files.js';
import { unauthenticated } from '../errors.js';

/** Who made a call: the token file entry's name or the JWT's `sub`, and what it may do. */
export interface Principal {
  name: string;
  scopes: ReadonlySet<Scope>;
}

export interface JwtSettings {
  issuer: string;
  audience: string;
  scopesClaim: string;
}

/** Asymmetric algorithms only: a JWKS holds public keys, and a shared secret in it would let anyone who reads it mint tokens. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
/** Remembered verified tokens at most; past it the oldest are forgotten. */
const CACHE_MAX = 10_000;
/** A remembered token is verified again after this long even if it lives longer. */
const CACHE_MAX_MS = 5 * 60_000;
const CLOCK_TOLERANCE_SECS = 30;

/** Whether `token` has the shape of a compact JWS (three base64url parts). */
export const looksLikeJwt = (token: string): boolean => /^[\w-]+\.[\w-]+\.[\w-]*$/.test(token);

export class JwtVerifier {
  private keys: ReturnType<typeof createLocalJWKSet>;
  private readonly verified = new Map<string, { principal: Principal; untilMs: number }>();

  private constructor(
    jwks: { keys: JWK[] },
    private readonly settings: JwtSettings,
  ) {
    this.keys = createLocalJWKSet(jwks);
  }

  /** Checks every key of the set (a key that does not import is an error naming it), then verifies with them. */
  static async create(jwks: { keys: JWK[] }, settings: JwtSettings): Promise<JwtVerifier> {
    await checkKeys(jwks);
    return new JwtVerifier(jwks, settings);
  }

  /** Replaces the keys (a reloaded JWKS file); tokens verified with the old keys are verified again. */
  async setKeys(jwks: { keys: JWK[] }): Promise<void> {
    await checkKeys(jwks);
    this.keys = createLocalJWKSet(jwks);
    this.verified.clear();
  }

  async verify(token: string): Promise<Principal> {
    const now = Date.now();
    const known = this.verified.get(token);
    if (known && known.untilMs > now) return known.principal;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys, {
        issuer: this.settings.issuer,
        audience: this.settings.audience,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_SECS,
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (err) {
      throw unauthenticated(`bearer token refused: ${(err as Error).message}`);
    }
    const principal = { name: payload.sub!, scopes: scopesOf(payload[this.settings.scopesClaim]) };
    if (this.verified.size >= CACHE_MAX) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { principal, untilMs: Math.min(payload.exp! * 1000, now + CACHE_MAX_MS) });
    return principal;
  }
}

/** The known scopes in a claim: a space-separated string (OAuth `scope`) or an array (`scp`); others are ignored. */
function scopesOf(claim: unknown): Set<Scope> {
  const names = typeof claim === 'string' ? claim.split(' ') : Array.isArray(claim) ? claim : [];
  return new Set(names.filter((s): s is Scope => (SCOPES as readonly unknown[]).includes(s)));
}

async function checkKeys(jwks: { keys: JWK[] }): Promise<void> {
  for (const [i, key] of jwks.keys.entries()) {
    if (key.kty === 'oct') throw new Error(`keys[${i}]: a symmetric key (kty "oct") cannot verify tokens here; use a public key`);
    try {
      await importJWK(key, typeof key.alg === 'string' ? key.alg : defaultAlg(key));
    } catch (err) {
      throw new Error(`keys[${i}]${key.kid ? ` (kid ${JSON.stringify(key.kid)})` : ''}: ${(err as Error).message}`);
    }
  }
}

/** The algorithm a key without `alg` is imported for, to check it. */
function defaultAlg(key: JWK): string {
  if (key.kty === 'EC') return { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512' }[key.crv ?? ''] ?? 'ES256';
  if (key.kty === 'OKP') return 'EdDSA';
  return 'RS256';
}
