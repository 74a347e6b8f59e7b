import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BrowserMissingError, browserCandidates, browserForTests, findBrowser } from '../../support/browser.js';

/** How the browser tests find a browser, or say why they do not run: on made-up install locations. */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'exarch-browser-lookup-'));
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, mode: number): string {
  const path = join(dir, name);
  writeFileSync(path, '#!/bin/sh\n');
  chmodSync(path, mode);
  return path;
}

describe('findBrowser', () => {
  it('takes the first usual location holding an executable, passing over files that cannot run', () => {
    const notExecutable = file('chromium', 0o644);
    const chrome = file('google-chrome', 0o755);
    expect(findBrowser({}, [join(dir, 'absent'), notExecutable, dir, chrome])).toEqual({ found: true, executablePath: chrome });
  });

  it('prefers CHROMIUM_PATH to every usual location', () => {
    const mine = file('my-chrome', 0o755);
    expect(findBrowser({ CHROMIUM_PATH: mine }, [file('chromium', 0o755)])).toEqual({ found: true, executablePath: mine });
  });

  it('looks where Debian, macOS and the Chrome installers put a browser', () => {
    expect(browserCandidates('linux')).toEqual(expect.arrayContaining(['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']));
    expect(browserCandidates('darwin', '/Users/me')).toEqual([
      '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
      '/Applications/Chromium.app/Contents/MacOS/Chromium',
      '/Users/me/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
      '/Users/me/Applications/Chromium.app/Contents/MacOS/Chromium',
    ]);
  });
});

describe('browserForTests', () => {
  it('returns the browser found', () => {
    const chrome = file('chrome', 0o755);
    expect(browserForTests('test/x.test.ts', {}, [chrome])).toBe(chrome);
  });

  it('without a browser on a developer machine: skips, with one line on stderr naming what to install', () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(browserForTests('test/x.test.ts', {}, [join(dir, 'chromium')])).toBeUndefined();
    expect(stderr).toHaveBeenCalledTimes(1);
    const line = String(stderr.mock.calls[0]?.[0]);
    expect(line).toMatch(
      /^skipping test\/x\.test\.ts: no Chromium or Chrome found \(looked in .*chromium\); install Chromium .*apt-get install chromium.* or set CHROMIUM_PATH/,
    );
    expect(line.indexOf('\n')).toBe(line.length - 1);
  });

  it('without a browser under CI=true: fails, saying what to install', () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(() => browserForTests('test/x.test.ts', { CI: 'true' }, [join(dir, 'chromium')])).toThrow(BrowserMissingError);
    expect(() => browserForTests('test/x.test.ts', { CI: 'true' }, [join(dir, 'chromium')])).toThrow(
      /test\/x\.test\.ts needs a browser under CI=true: no Chromium .*apt-get install chromium/,
    );
    expect(() => browserForTests('test/x.test.ts', { CI: '1' }, [join(dir, 'chromium')])).toThrow(/needs a browser under CI=1/);
    expect(stderr).not.toHaveBeenCalled();
    expect(browserForTests('test/x.test.ts', { CI: 'false' }, [join(dir, 'chromium')])).toBeUndefined();
  });

  it('a CHROMIUM_PATH that is not a browser fails even locally, naming it, rather than falling back', () => {
    const chrome = file('chrome', 0o755);
    const wrong = join(dir, 'nope');
    expect(() => browserForTests('test/x.test.ts', { CHROMIUM_PATH: wrong }, [chrome])).toThrow(`CHROMIUM_PATH=${wrong} is not an executable file`);
  });
});
