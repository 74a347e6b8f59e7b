import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ExarchError } from '../../engine/exarchError.js';

/**
 * The live viewer's per-run secret, as Jupyter's token: the server answers only requests that
 * carry it (`?token=…`), so another user of this machine, who can reach 127.0.0.1 as well, cannot
 * read the conversation. It lives in the printed address and nowhere else (never in the run's
 * stored options, never in a cookie: cookies are not kept apart by port, so a browser would hand
 * one to any other server on 127.0.0.1 it visits).
 */

/** URL-safe, so a token goes into the printed address as it is; 22 base64url characters hold 132 bits. */
const TOKEN_PATTERN = /^[A-Za-z0-9._~-]{22,512}$/;

/** A token the library was given is not one the viewer can rely on. */
export class ViewerTokenError extends ExarchError<'viewer-token'> {
  constructor(message: string) {
    super('viewer-token', message);
  }
}

/** A fresh token: 256 random bits, base64url. */
export function newViewerToken(): string {
  return randomBytes(32).toString('base64url');
}

/** `given` when it is a usable token (at least 22 URL-safe characters), else a `ViewerTokenError`. */
export function checkedViewerToken(given: string): string {
  if (!TOKEN_PATTERN.test(given))
    throw new ViewerTokenError('the live viewer token must be 22 to 512 URL-safe characters (A-Z a-z 0-9 - _ . ~), as newViewerToken() makes');
  return given;
}

/**
 * Whether a request's token is the viewer's, in time that does not depend on where they differ:
 * both are hashed first, so `timingSafeEqual` compares equal lengths and a wrong length says
 * nothing either.
 */
export function tokenMatches(expected: string, given: string | null): boolean {
  if (given === null) return false;
  const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(expected), digest(given));
}
