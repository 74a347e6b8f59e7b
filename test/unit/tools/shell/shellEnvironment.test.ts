import { describe, expect, it } from 'vitest';
import { sandboxEnvironment, shellEnvironment } from '../../../../src/tools/workspace/shellEnvironment.js';

/** The environment a run_shell command starts with: the user's, minus whatever is named like a credential. */

describe('the environment a shell command gets', () => {
  it('drops variables whose name ends in KEY, TOKEN, SECRET, PASSWORD or PASSWD after an underscore', () => {
    const env = {
      ANTHROPIC_API_KEY: 'k1',
      GITHUB_TOKEN: 't1',
      AWS_SECRET: 's1',
      DB_PASSWORD: 'p1',
      FTP_PASSWD: 'p2',
      HOME: '/home/u',
    };
    expect(shellEnvironment(env)).toStrictEqual({ HOME: '/home/u' });
  });

  it('drops a variable named just KEY, TOKEN, SECRET, PASSWORD or PASSWD', () => {
    expect(shellEnvironment({ KEY: '1', TOKEN: '2', SECRET: '3', PASSWORD: '4', PASSWD: '5', LANG: 'C' })).toStrictEqual({ LANG: 'C' });
  });

  it('matches names in any case (github_token is a credential too)', () => {
    expect(shellEnvironment({ github_token: 't', Npm_Key: 'k', editor: 'vi' })).toStrictEqual({ editor: 'vi' });
  });

  it('keeps names that only contain a credential word: KEYBOARD, TOKEN_COUNT, MONKEY, SECRETARY', () => {
    const env = { KEYBOARD: 'us', TOKEN_COUNT: '3', MONKEY: 'yes', SECRETARY: 'x', PASSWORD_FILE: '/p', PATH: '/bin' };
    expect(shellEnvironment(env)).toStrictEqual(env);
  });

  it('leaves out variables without a value and does not change the caller’s object', () => {
    const env: NodeJS.ProcessEnv = { PATH: '/bin', UNSET: undefined, MY_TOKEN: 't' };
    const kept = shellEnvironment(env);
    expect(Object.keys(kept)).toEqual(['PATH']);
    expect(env).toStrictEqual({ PATH: '/bin', UNSET: undefined, MY_TOKEN: 't' });
  });

  it('in the sandbox, TMPDIR is its private /tmp, whatever the user had', () => {
    expect(sandboxEnvironment({ PATH: '/bin', TMPDIR: '/home/u/tmp', CI_JOB_TOKEN: 'j' })).toStrictEqual({ PATH: '/bin', TMPDIR: '/tmp' });
    expect(sandboxEnvironment({ PATH: '/bin' })).toStrictEqual({ PATH: '/bin', TMPDIR: '/tmp' });
  });
});

describe('the environment of a sandboxed command and the Postgres store', () => {
  it('has none of libpq’s variables and no EXARCH_DB_URL, with or without a password in them', () => {
    const env = {
      PATH: '/bin',
      EXARCH_DB_URL: 'postgres://app@db.example/exarch',
      PGHOST: 'db.example',
      PGUSER: 'app',
      PGPASSFILE: '/home/u/.pgpass',
      PGSERVICEFILE: '/home/u/.pg_service.conf',
      PGSERVICE: 'exarch',
      PAGER: 'less',
    };
    expect(sandboxEnvironment(env)).toStrictEqual({ PATH: '/bin', PAGER: 'less', TMPDIR: '/tmp' });
  });
});
