import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the browser tests find a Chromium or Chrome to drive with playwright-core (which brings no
 * browser of its own). `CHROMIUM_PATH` wins; otherwise the places package managers and installers
 * put one. Without a browser a developer's run skips those tests with one line saying what to
 * install, and a CI run (`CI=true`) fails, so the browser tests can never be lost silently there.
 */

const INSTALL_HINT =
  'install Chromium (Debian/Ubuntu: `apt-get install chromium`; macOS: Google Chrome, or `brew install --cask chromium`) or set CHROMIUM_PATH to a Chrome/Chromium executable';

/** The usual install locations for a platform, in the order they are tried. */
export function browserCandidates(platform: NodeJS.Platform = process.platform, home: string = homedir()): string[] {
  if (platform === 'darwin') {
    const apps = ['Google Chrome.app/Contents/MacOS/Google Chrome', 'Chromium.app/Contents/MacOS/Chromium'];
    return [...apps.map((app) => join('/Applications', app)), ...apps.map((app) => join(home, 'Applications', app))];
  }
  if (platform === 'win32') {
    const roots = [process.env['PROGRAMFILES'], process.env['PROGRAMFILES(X86)'], process.env['LOCALAPPDATA']].filter((r): r is string => Boolean(r));
    return roots.map((root) => join(root, 'Google', 'Chrome', 'Application', 'chrome.exe'));
  }
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable', '/snap/bin/chromium'];
}

export type BrowserLookup =
  | { readonly found: true; readonly executablePath: string }
  /** `reason` is one line: what was looked for and what to do about it. */
  | { readonly found: false; readonly reason: string; readonly explicit: boolean };

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

export function findBrowser(env: NodeJS.ProcessEnv = process.env, candidates: readonly string[] = browserCandidates()): BrowserLookup {
  const chosen = env['CHROMIUM_PATH'];
  if (chosen !== undefined && chosen !== '') {
    // An explicit choice that does not work is a mistake to report, never a reason to look elsewhere.
    if (isExecutableFile(chosen)) return { found: true, executablePath: chosen };
    return { found: false, explicit: true, reason: `CHROMIUM_PATH=${chosen} is not an executable file; point it at a Chrome/Chromium executable` };
  }
  const executablePath = candidates.find(isExecutableFile);
  if (executablePath !== undefined) return { found: true, executablePath };
  return { found: false, explicit: false, reason: `no Chromium or Chrome found (looked in ${candidates.join(', ')}); ${INSTALL_HINT}` };
}

/**
 * The browser a test file should launch, or undefined when it is to be skipped (after printing
 * one line on stderr saying why). Throws when the run must have a browser: on CI (`CI=true`), or
 * when `CHROMIUM_PATH` names something that is not one.
 */
export function browserForTests(file: string, env: NodeJS.ProcessEnv = process.env, candidates?: readonly string[]): string | undefined {
  const lookup = findBrowser(env, candidates);
  if (lookup.found) return lookup.executablePath;
  const ci = env['CI'];
  // CI services set CI=true (some CI=1); CI=false or CI=0 is a developer saying it is not one.
  const onCi = ci !== undefined && ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
  if (lookup.explicit || onCi) {
    throw new BrowserMissingError(`${file} needs a browser${lookup.explicit ? '' : ` under CI=${ci}`}: ${lookup.reason}`);
  }
  process.stderr.write(`skipping ${file}: ${lookup.reason}\n`);
  return undefined;
}

export class BrowserMissingError extends Error {
  override readonly name = 'BrowserMissingError';
}
